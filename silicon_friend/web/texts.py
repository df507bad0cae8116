"""Every string the web app shows, one table per language (the language switch,
:mod:`silicon_friend.web.i18n`, picks one per browser tab)."""

from __future__ import annotations

import dataclasses

from memory_bank.languages import pick
from silicon_friend.memory_view import ReasonTexts

#: The memory kinds' names, one table per language: the memory tab, its filter and the
#: "memories used" notes under replies all say the same.
KIND_NAMES: dict[str, dict[str, str]] = {
    "en": {
        "turn": "chat turn",
        "daily_summary": "day’s events",
        "daily_personality": "day’s mood",
        "global_summary": "all events",
        "global_portrait": "portrait",
    },
    "zh": {
        "turn": "对话",
        "daily_summary": "当日事件",
        "daily_personality": "当日性格与情绪",
        "global_summary": "事件总览",
        "global_portrait": "用户画像",
    },
}


@dataclasses.dataclass(frozen=True)
class MemoryTabTexts:
    """The strings of the "My memories" tab (:mod:`silicon_friend.web.memory_tab`)."""

    knows_title: str
    daily_title: str
    day_events: str
    day_mood: str
    older_days: str
    knows_empty: str
    stale_note: str
    add_label: str
    add_placeholder: str
    add_button: str
    added: str
    search_label: str
    search_placeholder: str
    kind_label: str
    status_label: str
    since_label: str
    until_label: str
    apply: str
    previous: str
    next: str
    page_info: str
    none_found: str
    no_memories: str
    plot_caption: str
    select_hint: str
    columns: tuple[str, ...]
    kinds: dict[str, str]
    statuses: dict[str, str]
    why_title: str
    facts: str
    #: the facts line when forgetting is off (no time scale: nothing fades)
    facts_off: str
    edit_label: str
    #: the reply box of a chat turn (its message is in the edit box)
    edit_reply_label: str
    #: the label of the retention plot (Gradio's own default follows the browser's language)
    plot_label: str
    save: str
    saved: str
    delete: str
    deleted: str
    undo: str
    undone: str
    nothing_to_undo: str
    restore: str
    restored: str
    pick_first: str
    gone: str
    reasons: ReasonTexts


MEMORY_UI: dict[str, MemoryTabTexts] = {
    "en": MemoryTabTexts(
        knows_title="What I know about you",
        daily_title="Day by day",
        day_events="Events",
        day_mood="Personality and mood",
        older_days="…and {n} earlier days (choose the kind “day’s events” below to see them all).",
        knows_empty=(
            "Nothing yet. When a day of chatting is over I write down what happened and what you are like "
            "(or right away: “Summarize Memory Bank” on the Chat tab). It will all be shown here."
        ),
        stale_note="Some of this is out of date after recent changes; it is rewritten at the next summary.",
        add_label="Remember that…",
        add_placeholder="e.g. My sister Jo lives in Lisbon.",
        add_button="Remember this",
        added="Remembered: “{text}”",
        search_label="Search",
        search_placeholder="words in the memory",
        kind_label="Kind",
        status_label="Show",
        since_label="From (YYYY-MM-DD)",
        until_label="To (YYYY-MM-DD)",
        apply="Search",
        previous="◀ Previous",
        next="Next ▶",
        page_info="Memories {first}–{last} of {total} · page {page} of {pages}",
        none_found="No memory matches these filters.",
        no_memories="No memories yet: chat on the Chat tab, or add one above.",
        plot_caption="The plot shows the {n} newest chat turns and daily summaries of this page.",
        select_hint="Click a row to read the whole memory, see why it fades, and edit, delete or restore it.",
        columns=("date", "kind", "text", "strength", "retention", "last recall", "status"),
        kinds={"all": "All kinds", **KIND_NAMES["en"]},
        statuses={"all": "All", "kept": "kept", "forgotten": "forgotten", "hidden": "hidden"},
        why_title="Why it fades",
        facts="strength {strength} · recalls {recalls} · last recall {last} · time scale {days} day(s) · retention {r}",
        facts_off="strength {strength} · recalls {recalls} · last recall {last} · forgetting is off: it never fades",
        edit_label="Edit the text",
        edit_reply_label="The reply",
        plot_label="How the memories fade",
        save="Save changes",
        saved="Saved the new text.",
        delete="Delete",
        deleted="Deleted “{text}”. You can undo this.",
        undo="Undo delete",
        undone="Brought back “{text}”.",
        nothing_to_undo="There is no deletion to undo.",
        restore="Restore",
        restored="Restored: this memory comes up in chats again.",
        pick_first="Click a memory in the table first.",
        gone="That memory no longer exists (deleted in another tab?); the table was refreshed.",
        reasons=ReasonTexts(
            archived=(
                "Forgotten: its retention fell too low, so it left the live memories. It can still come up"
                " when a chat needs it (behind fresher memories; unless the cold tier is off), and a recall"
                " revives it. Restore brings it back now."
            ),
            hidden="Hidden by you: it never comes up in chats until you restore it.",
            off="Forgetting is off in this store, so it keeps full strength.",
            never_fades="Summaries of who you are never fade; they are rewritten from your chats.",
            recalled="Recalled on {n} day(s), last on {date}.",
            never_recalled="Never recalled since {date}.",
            fading="A {kind} fades over about {days} days per unit of strength; retention today {r:.2f}.",
            forgets_on="Unless it comes up again, it is forgotten around {date}.",
            overdue="It has been due since {date} and goes at the next forgetting pass, unless it comes up first.",
            classes={
                "small_talk": "It is small talk, so it fades fast.",
                "personal": "It is about your life, so it lasts longer.",
            },
        ),
    ),
    "zh": MemoryTabTexts(
        knows_title="我对你的了解",
        daily_title="逐日记录",
        day_events="事件",
        day_mood="性格与情绪",
        older_days="……以及更早的 {n} 天（在下方类型中选“当日事件”可看全部）。",
        knows_empty="还没有。每天聊完后，我会记下发生了什么、你是怎样的人（也可以在“聊天”页点“总结记忆库”立即生成），都会显示在这里。",
        stale_note="最近有改动，部分内容已过时；下次总结时会重写。",
        add_label="请记住……",
        add_placeholder="例如：我妹妹住在成都。",
        add_button="记住这条",
        added="已记住：“{text}”",
        search_label="搜索",
        search_placeholder="记忆中的词",
        kind_label="类型",
        status_label="显示",
        since_label="起始日期（YYYY-MM-DD）",
        until_label="结束日期（YYYY-MM-DD）",
        apply="搜索",
        previous="◀ 上一页",
        next="下一页 ▶",
        page_info="第 {first}–{last} 条，共 {total} 条 · 第 {page}/{pages} 页",
        none_found="没有符合筛选条件的记忆。",
        no_memories="还没有记忆：去“聊天”页聊聊，或在上方手动添加一条。",
        plot_caption="图中是本页最新的 {n} 条对话和每日总结。",
        select_hint="点击一行可查看完整记忆、它为何会淡忘，并可编辑、删除或恢复。",
        columns=("日期", "类型", "内容", "强度", "保持率", "上次回忆", "状态"),
        kinds={"all": "全部类型", **KIND_NAMES["zh"]},
        statuses={"all": "全部", "kept": "保留", "forgotten": "已遗忘", "hidden": "已隐藏"},
        why_title="为何会淡忘",
        facts="强度 {strength} · 回忆 {recalls} 次 · 上次回忆 {last} · 时间尺度 {days} 天 · 保持率 {r}",
        facts_off="强度 {strength} · 回忆 {recalls} 次 · 上次回忆 {last} · 遗忘已关闭：它不会淡忘",
        edit_label="编辑内容",
        edit_reply_label="回复",
        plot_label="记忆如何淡忘",
        save="保存修改",
        saved="已保存新内容。",
        delete="删除",
        deleted="已删除“{text}”，可以撤销。",
        undo="撤销删除",
        undone="已找回“{text}”。",
        nothing_to_undo="没有可以撤销的删除。",
        restore="恢复",
        restored="已恢复：这条记忆会重新出现在聊天中。",
        pick_first="请先在表格中点击一条记忆。",
        gone="这条记忆已不存在（可能在其他标签页中被删除），表格已刷新。",
        reasons=ReasonTexts(
            archived="已遗忘：它的保持率太低，已离开活跃记忆。聊天需要时它仍可能被想起（排在较新的记忆之后；关闭冷存储层则不会），被想起后就会恢复。点击“恢复”可立即找回。",
            hidden="已被你隐藏：在你恢复它之前，它不会出现在聊天中。",
            off="本记忆库未开启遗忘，它保持完整强度。",
            never_fades="关于你的总结不会淡忘，它们会根据你的聊天重写。",
            recalled="在 {n} 天里被回忆过，最近一次是 {date}。",
            never_recalled="自 {date} 起从未被回忆。",
            fading="“{kind}”每单位强度约 {days} 天淡忘；今天的保持率为 {r:.2f}。",
            forgets_on="如果不再被提起，它大约会在 {date} 被遗忘。",
            overdue="它自 {date} 起已到期，除非先被提起，下次遗忘时就会被遗忘。",
            classes={"small_talk": "这是寒暄闲聊，淡忘得快。", "personal": "这是关于你生活的事，记得更久。"},
        ),
    ),
}


@dataclasses.dataclass(frozen=True)
class UITexts:
    title: str
    intro: str
    name_label: str
    name_placeholder: str
    remember: str
    welcome_new: str
    welcome_back: str
    logged_in_as: str
    need_name: str
    chat_tab: str
    memories_tab: str
    message_label: str
    message_placeholder: str
    send: str
    stop: str
    new_conversation: str
    regenerate: str
    remove_last: str
    summarize: str
    settings: str
    temperature: str
    top_p: str
    max_new_tokens: str
    top_k: str
    model_failed: str
    not_saved: str
    failed_temporary: str
    stopped: str
    nothing_to_regenerate: str
    summary_title: str
    portrait_title: str
    no_summary: str
    refresh: str
    memory_id: str
    delete_memory: str
    deleted: str
    export: str
    export_file: str
    forget_confirm: str
    forget_me: str
    forgot: str
    forget_unconfirmed: str
    queued: str
    wait_for_reply: str
    #: Remove Last Turn or Regenerate on a page that shows an older state of the conversation
    changed_elsewhere: str
    line_full: str
    sent_once: str
    removed_last: str
    wait_to_switch: str
    nothing_to_export: str
    export_ready: str
    other_case: str
    columns: tuple[str, ...]
    language_label: str
    model_line: str
    small_model_note: str
    chinese_notice: str
    temporary_label: str
    temporary_on: str
    memories_used: str
    no_memories_used: str
    memory_updated: str
    reinforced: str
    temporary_turn: str
    score: str
    kinds: dict[str, str]
    loading_encoder: str
    session_ended: str
    #: the background summariser's state (``silicon_friend.web.summary_state``)
    summary_queued: str
    summary_running: str
    summary_done: str
    summary_up_to_date: str
    summary_some_failed: str
    summary_error: str
    summary_started: str
    summary_temporary: str
    #: why a summary failed, by kind (``voice``, ``pet``, ``echo``, ``copy``, ``timeout``)
    summary_reasons: dict[str, str]
    #: toast titles (Gradio's default titles are English)
    warning_title: str
    info_title: str
    #: The language's code (the plot's words are picked by it).
    language: str
    #: The "My memories" tab's texts in the same language.
    memory: MemoryTabTexts


UI: dict[str, UITexts] = {
    "en": UITexts(
        title="SiliconFriend",
        intro="A warm AI companion who remembers you. Tell me your name so I can recall our past chats.",
        name_label="Your name",
        name_placeholder="e.g. Emily",
        remember="Remember Me",
        welcome_new="Welcome, **{user}**! Nice to meet you: this is our first conversation.",
        welcome_back="Welcome back, **{user}**! I remember our past conversations.",
        logged_in_as="Signed in as **{user}**.",
        need_name="Please enter your name and click “Remember Me” first.",
        chat_tab="Chat",
        memories_tab="My memories",
        message_label="Message",
        message_placeholder="Type a message and press Enter",
        send="Send",
        stop="Stop",
        new_conversation="New Conversation",
        regenerate="Regenerate",
        remove_last="Remove Last Turn",
        summarize="Summarize Memory Bank",
        settings="Settings",
        temperature="Temperature",
        top_p="Top-p",
        max_new_tokens="Max new tokens",
        top_k="Memories retrieved",
        model_failed="⚠️ The model failed to reply ({error}). Your message was saved; click Regenerate to try again.",
        not_saved="⚠️ Your message was NOT saved ({error}). It is saved with your next message once the store works again; copy it before you leave this page.",
        failed_temporary="⚠️ The model failed to reply ({error}). A temporary chat saves nothing.",
        stopped="⏹ (stopped)",
        nothing_to_regenerate="There is no message to answer again yet.",
        summary_title="Summary of past events",
        portrait_title="Your portrait",
        no_summary="(not summarised yet)",
        refresh="Refresh",
        memory_id="Memory to delete",
        delete_memory="Delete memory",
        deleted="Deleted memory {memory_id}.",
        export="Export my memories",
        export_file="Your memory file (original MemoryBank format)",
        forget_confirm="I understand: delete all my memories for good",
        forget_me="Forget me",
        forgot="All memories of **{user}** were deleted.",
        forget_unconfirmed="Tick the box to confirm first.",
        queued="⏳ Queued: I will answer this after the current reply.",
        wait_for_reply="Wait until the current reply is finished.",
        changed_elsewhere="This conversation changed in another tab; here it is as it is now. Nothing was removed or redone.",
        removed_last="Removed the last turn from the chat and from your memories. To bring it back, click “Undo delete” in My memories (within 10 minutes).",
        line_full="Too many messages are waiting for a reply; send this one when some are answered (it is still in the box).",
        sent_once="The same message twice at once (a double click?): sent once.",
        wait_to_switch="Wait until the current reply is finished before changing the name (your message is still in the box).",
        nothing_to_export="{user} has no memories to export yet.",
        export_ready="[⬇ Download {file}]({link}) (only for you; the link works for 10 minutes).",
        other_case="Names are case-sensitive: “{user}” has no memories yet, but “{other}” does. Did you mean “{other}”?",
        columns=("id", "kind", "date", "text", "strength", "retention", "last recall", "forgotten"),
        language_label="Language",
        model_line="🤖 Replies come from **{model}**.",
        small_model_note=(
            "It is the packaged **135M-parameter, English-only demo model**: it runs offline on any CPU "
            "and shows the memory working, but it often gets facts wrong."
        ),
        chinese_notice=(
            "⚠️ The offline demo model cannot chat in Chinese. Start SiliconFriend with a real model: "
            "`silicon-friend web --language zh` plus one of "
            "`--llm openai:MODEL@http://127.0.0.1:8080/v1` (any OpenAI-compatible server: llama.cpp, vLLM, Ollama), "
            "`--llm llamacpp:/path/to/model.gguf` (a local GGUF), or ChatGLM/BELLE with a LoRA adapter "
            "`--llm hf:/path/to/chatglm-6b+/path/to/adapter`."
        ),
        temporary_label="Temporary chat (pause memory)",
        temporary_on="🕶 **Temporary chat**: I neither read nor write memories until you switch it off.",
        memories_used="🧠 Memories used ({n})",
        no_memories_used="🧠 No memories used",
        memory_updated="✓ memory updated: this turn was stored",
        reinforced="; {n} recalled memories strengthened",
        temporary_turn="🕶 temporary chat: nothing read or stored",
        score="score",
        kinds=KIND_NAMES["en"],
        loading_encoder="⏳ Loading the memory encoder (only after a start)…",
        session_ended="Your memories were deleted (Forget me): this message was not sent. Send it again to start anew.",
        summary_queued="🕓 Your summaries are queued: they are written in the background, and you can keep chatting.",
        summary_running=(
            "⏳ Writing your summaries in the background: step {done} of {total} (one per day, then your "
            "portrait and the overview). You can keep chatting."
        ),
        summary_done="✓ Summaries up to date: {n} written in {seconds} s.",
        summary_up_to_date="✓ Summaries up to date.",
        summary_some_failed=(
            "⚠️ {n} of the summaries could not be made ({first}); they keep their previous text and are "
            "tried again at the next summary."
        ),
        summary_error="⚠️ Making summaries failed ({error}); your memories are intact, and it is tried again later.",
        summary_started="Summarizing in the background: the progress is shown here and on “My memories”. You can keep chatting.",
        summary_temporary="A temporary chat writes no memories: switch it off to summarize.",
        summary_reasons={
            "voice": "the model kept talking to you instead of describing you",
            "pet": "the model kept describing your pet instead of you",
            "echo": "the model kept repeating its instructions",
            "copy": "the model kept copying the dialogue",
            "timeout": "the model took too long",
        },
        warning_title="Warning",
        info_title="Info",
        language="en",
        memory=MEMORY_UI["en"],
    ),
    "zh": UITexts(
        title="硅基朋友 SiliconFriend",
        intro="一位会记住你的温暖AI伙伴。告诉我你的名字，我就能想起我们过去的聊天。",
        name_label="你的名字",
        name_placeholder="例如：小明",
        remember="记住我",
        welcome_new="欢迎你，**{user}**！很高兴认识你，这是我们的第一次对话。",
        welcome_back="欢迎回来，**{user}**！我记得我们之前的对话。",
        logged_in_as="已登录：**{user}**。",
        need_name="请先输入你的名字并点击“记住我”。",
        chat_tab="聊天",
        memories_tab="我的记忆",
        message_label="消息",
        message_placeholder="输入消息后按回车发送",
        send="发送",
        stop="停止",
        new_conversation="新对话",
        regenerate="重新生成",
        remove_last="删除上一轮",
        summarize="总结记忆库",
        settings="设置",
        temperature="温度",
        top_p="Top-p",
        max_new_tokens="最大生成长度",
        top_k="检索记忆条数",
        model_failed="⚠️ 模型没有成功回复（{error}）。你的消息已保存，可点击“重新生成”再试一次。",
        not_saved="⚠️ 你的消息没有保存（{error}）。存储恢复后，它会随你的下一条消息一起保存；离开本页之前请先复制它。",
        failed_temporary="⚠️ 模型没有成功回复（{error}）。临时对话不保存任何内容。",
        stopped="⏹（已停止）",
        nothing_to_regenerate="还没有可以重新回答的消息。",
        summary_title="过往事件总结",
        portrait_title="你的性格画像",
        no_summary="（尚未总结）",
        refresh="刷新",
        memory_id="要删除的记忆",
        delete_memory="删除记忆",
        deleted="已删除记忆 {memory_id}。",
        export="导出我的记忆",
        export_file="你的记忆文件（原版 MemoryBank 格式）",
        forget_confirm="我明白：永久删除我的全部记忆",
        forget_me="忘记我",
        forgot="**{user}** 的全部记忆已删除。",
        forget_unconfirmed="请先勾选确认框。",
        queued="⏳ 排队中：当前回复完成后我就回答这条消息。",
        wait_for_reply="请等当前回复完成。",
        changed_elsewhere="这段对话在另一个标签页里有了变化，现在显示的是最新内容。没有删除或重新生成任何回复。",
        removed_last="已从对话和你的记忆中删除上一轮。想找回的话，请在“我的记忆”里点击“撤销删除”（10 分钟内有效）。",
        line_full="等待回复的消息太多了；请等前面的消息得到回复后再发送这条（它还在输入框里）。",
        sent_once="同一条消息连续发送了两次（双击了？）：只发送一次。",
        wait_to_switch="请等当前回复完成后再更换名字（你的消息还在输入框里）。",
        nothing_to_export="{user} 还没有可以导出的记忆。",
        export_ready="[⬇ 下载 {file}]({link})（仅限你本人，链接 10 分钟内有效）。",
        other_case="名字区分大小写：“{user}”还没有记忆，但“{other}”有。你是想用“{other}”吗？",
        columns=("编号", "类型", "日期", "内容", "强度", "保持率", "上次回忆", "已遗忘"),
        language_label="语言",
        model_line="🤖 回复来自 **{model}**。",
        small_model_note="这是内置的 **1.35 亿参数、仅支持英文的演示模型**：它能在任何 CPU 上离线运行，用来展示记忆功能，但常常答错事实。",
        chinese_notice=(
            "⚠️ 离线演示模型不能用中文聊天。请用真正的模型启动硅基朋友："
            "`silicon-friend web --language zh`，再加上其中之一："
            "`--llm openai:MODEL@http://127.0.0.1:8080/v1`（任何 OpenAI 兼容的服务：llama.cpp、vLLM、Ollama）、"
            "`--llm llamacpp:/path/to/model.gguf`（本地 GGUF 模型），或带 LoRA 适配器的 ChatGLM/BELLE："
            "`--llm hf:/path/to/chatglm-6b+/path/to/adapter`。"
        ),
        temporary_label="临时对话（暂停记忆）",
        temporary_on="🕶 **临时对话**：在你关闭它之前，我既不读取也不写入任何记忆。",
        memories_used="🧠 用到的记忆（{n}）",
        no_memories_used="🧠 没有用到记忆",
        memory_updated="✓ 记忆已更新：这一轮对话已保存",
        reinforced="；{n} 条被回忆的记忆得到加强",
        temporary_turn="🕶 临时对话：没有读取或保存任何内容",
        score="相关度",
        kinds=KIND_NAMES["zh"],
        loading_encoder="⏳ 正在加载记忆编码器（仅在启动后第一次）……",
        session_ended="你的记忆已被删除（忘记我）：这条消息没有发送。再发送一次即可重新开始。",
        summary_queued="🕓 你的总结已排队：会在后台撰写，你可以继续聊天。",
        summary_running="⏳ 正在后台撰写你的总结：第 {done}/{total} 步（每天一步，最后是性格画像和事件总览）。你可以继续聊天。",
        summary_done="✓ 总结已是最新：写入了 {n} 条，用时 {seconds} 秒。",
        summary_up_to_date="✓ 总结已是最新。",
        summary_some_failed="⚠️ 有 {n} 条总结没能生成（{first}）；它们保留之前的内容，下次总结时会再试。",
        summary_error="⚠️ 生成总结失败（{error}）；你的记忆完好无损，稍后会再试。",
        summary_started="正在后台总结：进度显示在这里和“我的记忆”页。你可以继续聊天。",
        summary_temporary="临时对话不写入任何记忆：关闭它之后再总结。",
        summary_reasons={
            "voice": "模型总是在对你说话，而不是描述你",
            "pet": "模型总是在描述你的宠物，而不是你",
            "echo": "模型总是在重复它的指令",
            "copy": "模型总是在照抄对话",
            "timeout": "模型用时太长",
        },
        warning_title="提醒",
        info_title="提示",
        language="zh",
        memory=MEMORY_UI["zh"],
    ),
}


#: The language switch's choices: (shown name, language code).
LANGUAGES = (("English", "en"), ("中文", "zh"))


def ui_texts(language: str) -> UITexts:
    return pick(UI, language, "interface texts")


def memory_texts(language: str) -> MemoryTabTexts:
    return pick(MEMORY_UI, language, "memory tab texts")
