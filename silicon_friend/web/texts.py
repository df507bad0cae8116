"""Every string the web app shows, one table per language (the language switch,
:mod:`silicon_friend.web.i18n`, picks one per browser tab)."""

from __future__ import annotations

import dataclasses

from memory_bank.languages import pick


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
        kinds={
            "turn": "dialog turn",
            "daily_summary": "daily summary",
            "daily_personality": "daily personality",
            "global_summary": "global event summary",
            "global_portrait": "global portrait",
        },
        loading_encoder="⏳ Loading the memory encoder (only after a start)…",
        session_ended="Your memories were deleted: this message was not sent. Enter your name to start again.",
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
        kinds={
            "turn": "对话",
            "daily_summary": "每日总结",
            "daily_personality": "每日性格",
            "global_summary": "全局事件总结",
            "global_portrait": "全局画像",
        },
        loading_encoder="⏳ 正在加载记忆编码器（仅在启动后第一次）……",
        session_ended="你的记忆已被删除：这条消息没有发送。请输入名字重新开始。",
    ),
}


#: The language switch's choices: (shown name, language code).
LANGUAGES = (("English", "en"), ("中文", "zh"))


def ui_texts(language: str) -> UITexts:
    return pick(UI, language, "interface texts")
