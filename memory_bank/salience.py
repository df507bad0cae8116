"""How much a turn is worth keeping, judged from its words when it is written (no LLM).

Forgetting should take small talk first and keep what the user told about their life. A turn is
weighed by what the *user* said (the companion's reply is its own words, often guesses about the
user, so it never raises a turn's weight), into one of three classes:

* ``small_talk``: greetings, thanks, goodbyes, fillers ("Hi!", "Thanks, see you!", "哈哈好的");
* ``personal``: the user speaks about themselves (``I``, ``my``, ``我``) with some substance:
  at least :data:`PERSONAL_MIN_TOKENS` content tokens;
* ``chat``: everything else (questions to the companion, reactions, opinions).

The class's weight (:data:`CONTENT_WEIGHTS`) multiplies the memory's forgetting time scale (see
:func:`memory_bank.forgetting.time_scales`): 0.25 makes small talk fade four times faster, 2 makes
a personal statement last twice as long. The weight is stored with the memory, so a forgetting
pass needs no text, and it is the same on every run (a pure function of the text).

>>> content_class("Thanks so much, see you soon!")
'small_talk'
>>> content_class("My sister Jo is moving to Lisbon in May for a design job.")
'personal'
>>> content_class("我下个月要去大理学木工，已经报了名。")
'personal'
>>> content_weight("What do you think about jazz?")
1.0
"""

from __future__ import annotations

import re

from memory_bank.text import tokenize

#: Weight per content class: a multiplier of the forgetting time scale.
CONTENT_WEIGHTS: dict[str, float] = {"small_talk": 0.25, "chat": 1.0, "personal": 2.0}

#: Content tokens a first-person turn needs to count as ``personal``.
PERSONAL_MIN_TOKENS = 4

# Words of greetings, thanks, agreement and fillers (as index tokens, i.e. lower-cased and
# stemmed the way memory_bank.text.tokenize returns them, so both sides match).
_SMALL_TALK_WORDS = (
    "hi hello hey hiya yo morning evening afternoon night bye goodbye see soon later thank thanks "
    "welcome ok okay yeah yep yes no nope sure cool great nice awesome wow lol haha hahaha hehe "
    "glad good fine well right totally absolutely definitely indeed true agree sound love care "
    "amazing wonderful fantastic lovely sweet pleasure talk chat catch glad hear happy day"
)
_SMALL_TALK = frozenset(t for w in _SMALL_TALK_WORDS.split() for t in tokenize(w))
_SMALL_TALK_ZH = "你好您好嗨早上好晚上好晚安再见拜拜谢谢感谢不客气好的好吧嗯嗯哈哈哈呵呵嘿嘿对对是的没错行可以当然太棒了真好"
_SMALL_TALK_ZH_TOKENS = frozenset(tokenize(_SMALL_TALK_ZH))

_SPEAKER = re.compile(r"^[^\W\d][\w .'-]{0,40}:\s+")
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|us)\b", re.IGNORECASE)
_FIRST_PERSON_ZH = re.compile("[我咱]")


def content_class(query: str) -> str:
    """The class of a turn from the user's words (a leading ``Speaker:`` tag is ignored)."""
    text = _SPEAKER.sub("", query.strip(), count=1)
    tokens = [t for t in tokenize(text) if t not in _SMALL_TALK and t not in _SMALL_TALK_ZH_TOKENS]
    # A CJK run yields characters and bigrams; count the characters only.
    content = [t for t in tokens if not (len(t) == 2 and _is_cjk(t))]
    if len(content) <= 1:
        return "small_talk"
    first_person = _FIRST_PERSON.search(text) or _FIRST_PERSON_ZH.search(text)
    if first_person and len(content) >= PERSONAL_MIN_TOKENS:
        return "personal"
    return "chat"


def content_weight(query: str, weights: dict[str, float] | None = None) -> float:
    """The forgetting weight of a turn whose user message is ``query`` (see the module)."""
    return (weights or CONTENT_WEIGHTS)[content_class(query)]


def _is_cjk(token: str) -> bool:
    return all("\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff" for c in token)
