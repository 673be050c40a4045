"""Sampled model outputs: is this garbage, and how much of it per revision.

``garbage(text, prompt, token_ids)`` measures one output: a loop (one unit repeated to the end), one
character filling the output (``!!!!!!``), special/reserved tokens in the text, control and replacement
characters, mixed-script soup, a script other than the prompt's, empty text, constant token ids. The same
measure serves the golden prober (``GoldenProber(garbage=is_garbage)``) and the diagnosis' quality proxies
for ``bad-model-rollout`` (``measure(samples)`` → per-revision garbage rate; a file of outputs gives a
``garbage_outputs`` finding with hint bad-model-rollout that the diagnosis reads as ``log_bad_model_rollout``).

``parse`` reads files of outputs: JSON/JSONL of OpenAI completion or chat responses (or records with
``prompt``/``output``/``revision``), vLLM request logs (``Generated response <id>: output: '...',
output_token_ids: [...]``) and the offline examples' ``Prompt: '...', Generated text: '...'`` lines; plain
text is taken as one output only when it does not look like a log or command output, and then yields a
finding only when it is garbage.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from llm_oncall.evidence import paste
from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

MAX_TEXT = 200_000
MIN_LOOP_REPEATS = 6
MIN_LOOP_CHARS = 40
GARBAGE_RATE_ALERT = 0.2

_SPECIAL = re.compile(
    r"<\|reserved_special_token_\d{1,6}\|>|<\|[a-z][a-z_]{1,30}\|>|<unk>|<pad>|\[PAD\]|\[UNK\]|<extra_id_\d{1,4}>"
    r"|<unused\d{1,5}>|\[unused\d{1,5}\]|<0x[0-9A-F]{2}>|</?s>"
)
# Chat-template role markers leaking into the text (ChatGLM's "<|assistant|>", decoded as "|assistant|" too).
# the reserved tokens of BERT/T5/Cohere-style vocabularies written out: <EOS_TOKEN>, <SEP>, <MASK_TOKEN>, <UNK>
_NAMED_TOKEN = re.compile(r"<(?:EOS|BOS|SEP|CLS|PAD|UNK|MASK|EOP|EOT|SOS)(?:_TOKEN)?>", re.IGNORECASE)
# the most frequent English function words: a text of 25+ words made almost only of them is word salad
_FUNCTION_WORD_LIST = ("a an the of to in on at by for with from as and or but if that this these those which who what "
                       "it its is are was were be been has have had do does not no so than then there their they he "
                       "she we you i")
_FUNCTION_WORDS = frozenset(_FUNCTION_WORD_LIST.split(" "))
FUNCTION_WORD_SALAD = 0.75
_ROLES = r"(?:assistant|user|system|observation)"
_ROLE = re.compile(rf"<\|{_ROLES}\|>|(?<![<|])\|{_ROLES}\|(?![>|])")
# a chat role word glued to the end of a turn ("... would you like to chat?assistant"): the template's role
# header decoded as text, the model writing the next turn itself
_GLUED_ROLE = re.compile(r"[.!?)](?:assistant|user)\b")
GLUED_ROLES = 2
_RESERVED = re.compile(
    r"reserved_special_token|<unused\d|\[unused\d|<extra_id_|<unk>|\[UNK\]|<pad>|\[PAD\]|<0x[0-9A-F]{2}>")
_LANGUAGE_ASKED = re.compile(
    r"translat|language|\b(?:in|into|to) (?:english|chinese|mandarin|japanese|korean|russian|arabic|hebrew|hindi|"
    r"greek|thai|french|german|spanish|ukrainian|vietnamese|persian|turkish)\b|中文|日本語|한국어|русск",
    re.IGNORECASE,
)
# the first word of a character's Unicode name; Japanese text also writes the prolonged sound mark ー
# ("KATAKANA-HIRAGANA PROLONGED SOUND MARK") and the iteration mark 々 ("IDEOGRAPHIC ITERATION MARK") in its words
_CJK_FAMILY = frozenset({"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "KATAKANA-HIRAGANA", "IDEOGRAPHIC",
                         "KANGXI"})
_NOT_A_SCRIPT = frozenset({"MATHEMATICAL", "MODIFIER", "FULLWIDTH", "HALFWIDTH", "CIRCLED", "PARENTHESIZED",
                           "SUPERSCRIPT", "SUBSCRIPT", "COMBINING", "NKO"})
# Latin mixes with Greek (α-helix, Δx) and with the CJK family (使用GPU) in normal text.
_MIX_OK = frozenset({frozenset({"LATIN", "GREEK"})})


@dataclass(frozen=True)
class Garbage:
    garbage: bool
    reasons: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    try:
        first = unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return None
    if first in _NOT_A_SCRIPT:
        return None
    return "CJK" if first in _CJK_FAMILY else first


def _scripts(text: str) -> Counter[str]:
    return Counter(s for ch in text for s in [_script(ch)] if s)


def _loop(text: str) -> tuple[str, int] | None:
    """(unit, repeats) when the text ends in one unit repeated back to back, covering most of it."""
    t = " ".join(text.split())
    n = len(t)
    for p in range(1, min(64, n // MIN_LOOP_REPEATS) + 1):
        unit = t[n - p:]
        k = 1
        while k * p + p <= n and t[n - (k + 1) * p: n - k * p] == unit:
            k += 1
        covered = k * p
        if k >= MIN_LOOP_REPEATS and covered >= MIN_LOOP_CHARS and covered >= 0.5 * n and unit.strip():
            return unit, k
        if k >= 8 and covered >= 120 and unit.strip():  # a late loop that runs to the end (max_tokens)
            return unit, k
        if k >= 20 and unit.strip():
            return unit, k
        # a syllable loop over most of the text ("metryryryryry…"): a short unit with a letter, 12+ times
        if k >= 12 and p <= 4 and covered >= 0.5 * n and any(ch.isalpha() for ch in unit):
            return unit, k
    return None


def _word_loop(text: str) -> float:
    words = text.split()
    if len(words) < 40:
        return 1.0
    return len(set(words)) / len(words)


STUTTER_SHARE = 0.3


def _stutter(text: str) -> float:
    """Share of words equal to the word before them ("The The answer answer to to"): a decoder that emits every
    token twice or more. Normal prose doubles a word almost never ("had had"); 8+ words needed."""
    words = [w.lower() for w in text.split() if any(ch.isalnum() for ch in w)]
    if len(words) < 8:
        return 0.0
    return sum(1 for a, b in pairwise(words) if a == b) / (len(words) - 1)


NGRAM = 4
# 150-word chunks of this repository's docs, code and YAML (491 of them) repeat at most 20% of their 4-grams
# (median 0): 0.3 keeps a margin above healthy text, including code and JSON.
REPEATED_NGRAM_SHARE = 0.3


def _repeated_ngrams(text: str) -> float:
    """Share of word 4-grams seen earlier in the same output: a phrase loop that varies a little still
    repeats its 4-grams; normal prose, code and JSON repeat few (punctuation-only words are skipped)."""
    words = [w.lower() for w in text.split() if any(ch.isalnum() for ch in w)]
    if len(words) < 30:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    total = 0
    for i in range(len(words) - NGRAM + 1):
        g = tuple(words[i:i + NGRAM])
        total += 1
        if g in seen:
            repeats += 1
        seen.add(g)
    return repeats / total if total else 0.0


def garbage(text: str, prompt: str | None = None, token_ids: Sequence[int] | None = None,
            vocab: frozenset[str] | None = None) -> Garbage:
    """Measures one output; ``garbage`` when any reason holds. ``vocab``: the words of the document the output
    is quoted in (its other words tell glued words apart). Never raises."""
    text = text[:MAX_TEXT] if isinstance(text, str) else ""
    reasons: list[str] = []
    scores: dict[str, float] = {}
    visible = "".join(text.split())
    if token_ids and len(token_ids) >= 4 and len(set(token_ids)) == 1:
        reasons.append("constant_token_ids")
        scores["token_id"] = float(token_ids[0])
    if not visible:
        reasons.append("empty")
        return Garbage(True, tuple(reasons), scores)
    top, top_n = Counter(visible).most_common(1)[0]
    whole = len(visible) >= 4 and top_n == len(visible)
    most = top_n >= 10 and top_n / len(visible) >= 0.5 and re.search(re.escape(top) * 10, visible) is not None
    if not top.isalnum() and (whole or most):
        reasons.append("one_character")  # "!!!!!!!!": one symbol fills the output
    elif (top.isalnum() and len(visible) >= 20 and top_n / len(visible) >= 0.6
          and re.search(re.escape(top) * 10, visible) and not re.search(r"[^\W\d_]{3}", text)):
        reasons.append("one_character")  # "000000000000000\n1150000000000001": one digit or letter, no word
    elif not any(ch.isalnum() for ch in visible) and not _is_json(text):
        reasons.append("no_words")  # nothing but punctuation and symbols: ", , ,"
    loop = _loop(text)
    if loop is not None and "one_character" not in reasons:
        reasons.append("repetition")
        scores["loop_repeats"] = float(loop[1])
    elif (_word_loop(text) < 0.15 or _repeated_ngrams(text) >= REPEATED_NGRAM_SHARE
          or _stutter(text) >= STUTTER_SHARE):
        reasons.append("repetition")
    if _function_word_share(text) >= FUNCTION_WORD_SALAD or _glued_words(text, vocab) >= GLUED_WORDS:
        reasons.append("word_salad")
    if _identifier_soup(text):
        reasons.append("identifier_soup")
    specials = _SPECIAL.findall(text) + _ROLE.findall(text) + _NAMED_TOKEN.findall(text)
    reserved = [s for s in specials if _RESERVED.search(s)]
    if reserved or len(specials) >= 3 or len(_GLUED_ROLE.findall(text)) >= GLUED_ROLES:
        reasons.append("special_tokens")
        scores["special_tokens"] = float(len(specials))
    controls = sum(1 for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r")
    replacement = text.count("\ufffd")
    if controls >= 3 or (controls and controls / len(text) >= 0.01):
        reasons.append("control_characters")
        scores["control_characters"] = float(controls)
    if replacement >= 3 or (replacement and replacement / len(text) >= 0.02):
        reasons.append("replacement_characters")
        scores["replacement_characters"] = float(replacement)
    scripts = _scripts(text)
    letters = sum(scripts.values())
    if letters >= 12 and _soup(text, scripts):
        reasons.append("mixed_scripts")
    if prompt and letters >= 20 and not _LANGUAGE_ASKED.search(prompt):
        asked = _scripts(prompt)
        if sum(asked.values()) >= 8:
            want = asked.most_common(1)[0][0]
            share = scripts.get(want, 0) / letters
            if share < 0.2:
                reasons.append("script_mismatch")
                scores["prompt_script_share"] = round(share, 3)
    return Garbage(bool(reasons), tuple(dict.fromkeys(reasons)), scores)


# words glued into one identifier past any naming habit: "def main_module_example_rebind_to_context_freeze_use_
# main_question_order_3_buggy_in_fact_oa_watrdut_...": token soup in the shape of code
_IDENT = re.compile(r"[A-Za-z0-9]{1,40}(?:_[A-Za-z0-9]{1,40}){19,}")
IDENTIFIER_SOUP_SHARE = 0.5


def _identifier_soup(text: str) -> bool:
    """One identifier of 20+ underscore-joined parts (long test names stop short of it) that makes up most
    of the output."""
    visible = sum(1 for ch in text if not ch.isspace())
    longest = max((len(m.group(0)) for m in _IDENT.finditer(text[:MAX_TEXT])), default=0)
    return visible > 0 and longest / visible >= IDENTIFIER_SOUP_SHARE


def _function_word_share(text: str) -> float:
    """Share of function words among the words of a 25+ word text (English prose: about half)."""
    words = re.findall(r"[A-Za-z]+", text[:MAX_TEXT])
    if len(words) < 25:
        return 0.0
    return sum(1 for w in words if w.lower() in _FUNCTION_WORDS) / len(words)


GLUED_WORDS = 3


_GLUE_LEADING = ("and", "the", "of", "to", "for", "with", "but")
_GLUE_TRAILING = ("was", "the", "and")
# with only the document's other words as witness: the function words that start few English words (not "to",
# "for", "of": together, forward, forever, tonight, thereof)
_GLUE_LEADING_DOC = ("and", "the", "with", "but")


def _glued_words(text: str, vocab: frozenset[str] | None = None) -> int:
    """Words glued to a function word ("andrequest", "todescription", "conversationswas", "butRobert") whose
    rest is a word of the same text, or (for the function words that start few English words) of the
    document it is quoted in: a degenerate decoder drops the spaces between tokens. At least 3 of them, and
    2% of the words, count."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", text[:MAX_TEXT])]
    if len(words) < 25:
        return 0
    own = set(words)
    doc = vocab or frozenset()
    glued = 0
    for w in words:
        if len(w) < 7:
            continue
        lead = any(w.startswith(fw) and len(w) - len(fw) >= 4
                   and (w[len(fw):] in own or (fw in _GLUE_LEADING_DOC and w[len(fw):] in doc))
                   for fw in _GLUE_LEADING)
        trail = any(w.endswith(fw) and len(w) - len(fw) >= 5 and (w[:-len(fw)] in own or w[:-len(fw)] in doc)
                    for fw in _GLUE_TRAILING)
        if lead or trail:
            glued += 1
    return glued if glued / len(words) >= 0.02 else 0


def words_of(text: str) -> frozenset[str]:
    """The lowercase words of a document (what ``garbage(vocab=...)`` reads)."""
    return frozenset(w.lower() for w in re.findall(r"[A-Za-z]{4,}", text[:MAX_TEXT]))


def is_garbage(prompt: str, answer: str) -> bool:
    """The golden prober's measure (``GoldenProber(garbage=is_garbage)``): is this answer garbage?"""
    return garbage(answer, prompt).garbage


def _soup(text: str, scripts: Counter[str]) -> bool:
    """Script soup: many writing systems with words that glue them together, or words mixing alphabets that
    never mix in normal text. A normal answer in Chinese with English terms (使用GPU) mixes two; a
    translation lists several, each in words of its own."""
    present = [s for s, n in scripts.items() if n >= 3]
    strict = 0  # words mixing alphabets (Latin+Thai, Cyrillic+Latin, ...), Latin+Greek and Latin+CJK allowed
    glued = 0  # words mixing any two writing systems
    words = 0
    for w in text.split():
        ws = {s for ch in w for s in [_script(ch)] if s}
        if not ws:
            continue
        words += 1
        if len(ws) >= 2:
            glued += 1
        alphabetic = ws - {"CJK"} if "LATIN" in ws else ws
        if len(alphabetic) >= 2 and frozenset(alphabetic) not in _MIX_OK:
            strict += 1
    if len(present) >= 3 and glued >= 3:
        return True
    return strict >= 3 and strict / max(words, 1) >= 0.2


# ---- samples --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    output: str
    prompt: str | None = None
    revision: str = "unknown"
    token_ids: tuple[int, ...] = ()
    line: int = 0  # 0-based line of the file where it was read


@dataclass
class RevisionQuality:
    revision: str
    samples: int = 0
    garbage: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    lines: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.garbage / self.samples if self.samples else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "garbage": self.garbage, "garbage_rate": round(self.rate, 4),
                "reasons": dict(self.reasons.most_common())}


def measure(samples: Iterable[Sample]) -> dict[str, RevisionQuality]:
    """Garbage per revision: the quality proxy a rollout gate or the diagnosis reads."""
    out: dict[str, RevisionQuality] = {}
    for s in samples:
        q = out.setdefault(s.revision, RevisionQuality(s.revision))
        g = garbage(s.output, s.prompt, s.token_ids)
        q.samples += 1
        if g.garbage:
            q.garbage += 1
            q.reasons.update(g.reasons)
            q.lines.append(s.line)
    return out


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _ints(value: object) -> tuple[int, ...]:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return ()


def _from_record(rec: dict[str, Any], line: int) -> list[Sample]:
    labels: dict[str, Any] = rec["labels"] if isinstance(rec.get("labels"), dict) else {}
    revision = str(rec.get("revision") or rec.get("model_revision") or labels.get("revision") or "")
    body = rec.get("response") if isinstance(rec.get("response"), dict) else rec
    prompt = rec.get("prompt")
    if not isinstance(prompt, str):
        msgs = (rec.get("request") or {}).get("messages") if isinstance(rec.get("request"), dict) else rec.get(
            "messages")
        prompt = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict)) if isinstance(
            msgs, list) else None
    if not revision:
        model = body.get("model") if isinstance(body, dict) else None
        revision = f"model:{model}" if isinstance(model, str) and model else "unknown"
    out: list[Sample] = []
    choices = body.get("choices") if isinstance(body, dict) else None
    if isinstance(choices, list):
        for c in choices:
            if not isinstance(c, dict):
                continue
            text = c.get("text")
            if not isinstance(text, str) and isinstance(c.get("message"), dict):
                text = c["message"].get("content")
            if not isinstance(text, str) and isinstance(c.get("delta"), dict):
                text = c["delta"].get("content")
            if text is None and not _ints(c.get("token_ids")):
                continue
            out.append(Sample(text if isinstance(text, str) else "", prompt, revision, _ints(c.get("token_ids")),
                              line))
        return out
    for key in ("output", "completion", "generated_text", "response", "text", "answer"):
        v = rec.get(key)
        if isinstance(v, str):
            ids = _ints(rec.get("output_token_ids") or rec.get("token_ids"))
            return [Sample(v, prompt, revision, ids, line)]
    return out


def _json_samples(text: str) -> list[Sample] | None:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        doc = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        doc = None
    if doc is not None:
        recs = doc if isinstance(doc, list) else [doc]
        got = [s for r in recs if isinstance(r, dict) for s in _from_record(r, 0)]
        return got or None
    got = []
    for i, line in enumerate(split_lines(text)):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(rec, dict):
            got.extend(_from_record(rec, i))
    return got or None


_SQ = r"'(?:[^'\\]|\\.){0,20000}'"
_DQ = r'"(?:[^"\\]|\\.){0,20000}"'
_STR = f"(?:{_SQ}|{_DQ})"  # a Python repr of a string
_GENERATED = re.compile(r"Generated response (?P<id>\S{1,200}?)(?: \(streaming [a-z]{1,10}\))?: output: "
                        rf"(?P<out>{_STR})(?:, output_token_ids: (?P<ids>\[[\d, ]{{0,20000}}\]|None))?")
_RECEIVED = re.compile(rf"Received request (?P<id>\S{{1,200}}?): prompt: (?P<p>{_STR})")
_EXAMPLE = re.compile(rf"Prompt: (?P<p>{_STR}),\s{{0,4}}Generated text: (?P<out>{_STR})")


_GENERATED_ONLY = re.compile(rf"^\s{{0,8}}Generated text: (?P<out>{_STR})")
# vLLM's RequestOutput repr: "RequestOutput(request_id=0, prompt='...', ... outputs=[CompletionOutput(index=0,
# text='...', token_ids=[...], ...)"
_REQUEST_OUTPUT = re.compile(rf"RequestOutput\(request_id=[^,]{{0,200}}, prompt=(?P<p>{_STR}|None)")
_COMPLETION_OUTPUT = re.compile(rf"CompletionOutput\(index=\d{{1,4}}, text=(?P<out>{_STR})"
                                r"(?:, token_ids=(?:array\('l', )?\[(?P<ids>[\d, ]{0,20000})\])?")
# lmdeploy's pipeline result, printed (lmdeploy/messages.py, the Response dataclass): "Response(text='...',
# generate_token_len=1, input_token_len=287, session_id=0, finish_reason=None, token_ids=[0], ...)"
_LMDEPLOY_RESPONSE = re.compile(rf"\bResponse\(text=(?P<out>{_STR}), generate_token_len=\d{{1,9}}"
                                r"(?:.{0,200}?\btoken_ids=\[(?P<ids>[\d, ]{0,20000})\])?")
# An OpenAI response cut short (no valid JSON left) or printed as a Python dict: its "content"/"text" value.
_OPEN_SQ = r"'(?:[^'\\]|\\.){0,50000}'?"
_OPEN_DQ = r'"(?:[^"\\]|\\.){0,50000}"?'
_FRAGMENT = re.compile(rf"(?P<q>[\"'])(?:content|text)(?P=q)\s{{0,4}}:\s{{0,4}}(?P<v>{_OPEN_DQ}|{_OPEN_SQ})")


def _decode_fragment(v: str) -> str:
    quote = v[0]
    body = v[1:-1] if len(v) > 1 and v.endswith(quote) else v[1:]
    body = re.sub(r"\\(?:u[0-9a-fA-F]{0,3}|x[0-9a-fA-F]?)?$", "", body)  # a cut escape at the end
    try:
        out = json.loads('"' + body.replace('"', '\\"') + '"') if quote == '"' else ast.literal_eval(
            "'" + body + "'")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return body
    return out if isinstance(out, str) else body


def _fragment_samples(text: str) -> list[Sample] | None:
    if "choices" not in text and "content" not in text:
        return None
    got = [Sample(_decode_fragment(m.group("v")), None, "unknown", (), text.count("\n", 0, m.start()))
           for m in _FRAGMENT.finditer(text) if "choices" in text[:m.start()] or "message" in text[:m.start()]]
    return got or None


def _literal(s: str | None) -> str | None:
    if not s:
        return None
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, str) else None


def _token_ids(listed: str | None) -> tuple[int, ...]:
    """The token ids of a printed list ("[0, 13, 13]", "array('l', [...])"), at most 4096."""
    return tuple(int(x) for x in re.findall(r"\d+", listed or ""))[:4096]


def _log_samples(text: str) -> list[Sample] | None:
    if "Generated response" not in text and "Generated text:" not in text and "CompletionOutput(" not in text \
            and "generate_token_len=" not in text:
        return None
    prompts: dict[str, str] = {}
    got: list[Sample] = []
    for i, line in enumerate(split_lines(text)):
        if (r := _RECEIVED.search(line)) and (p := _literal(r.group("p"))) is not None:
            prompts[r.group("id")] = p
        elif (g := _GENERATED.search(line)) and (o := _literal(g.group("out"))) is not None:
            rid = g.group("id")
            got.append(Sample(o, prompts.get(rid) or prompts.get(rid.split("-", 1)[-1]), "unknown",
                              _token_ids(g.group("ids")), i))
        elif (e := _EXAMPLE.search(line)) and (o := _literal(e.group("out"))) is not None:
            got.append(Sample(o, _literal(e.group("p")), "unknown", (), i))
        elif (e := _GENERATED_ONLY.search(line)) and (o := _literal(e.group("out"))) is not None:
            got.append(Sample(o, None, "unknown", (), i))
        elif "generate_token_len=" in line and (r := _LMDEPLOY_RESPONSE.search(line)) \
                and (o := _literal(r.group("out"))) is not None:
            got.append(Sample(o, None, "unknown", _token_ids(r.group("ids")), i))
        elif "CompletionOutput(" in line:
            rp = _REQUEST_OUTPUT.search(line)
            prompt = _literal(rp.group("p")) if rp else None
            for c in _COMPLETION_OUTPUT.finditer(line):
                o = _literal(c.group("out"))
                if o is not None:
                    got.append(Sample(o, prompt, "unknown", _token_ids(c.group("ids")), i))
    return got or None


# Plain text that is a log or command output, not a model's answer: a timestamp or level at the start of
# the line (also Go's "2025/11/25 22:33:36"), a bracketed prefix, a table row, a snake_case function name
# before a colon (llama.cpp's "load_tensors: ...", "print_info: ..."); or a log level
# anywhere in the line (an indented quote of "nvidia-modeset: ERROR: GPU:0: ..." is still a log).
_LOGLIKE = re.compile(r"^\s{0,4}(?:\[\s{0,8}[\d+]|\d{4}[-/]\d\d[-/]\d\d[ T]|\d{1,2}:\d\d:\d\d|[A-Z][a-z]{2} [ \d]\d |"
                      r"[IWEF]\d{4} |\(\w{1,40} pid=\d{1,8}\)|\||\+[-=]|[a-z][a-z0-9]{0,30}_[a-z0-9_]{1,40} ?: )")
_LEVEL = re.compile(r"\b(?:INFO|DEBUG|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")
# more log shapes no model writes: dmesg -T's "[Fri Apr 17 19:56:43 2026]", glog / c10's "[W1015 16:32:20.40",
# CANN's error-code lines ("EH9999: ..."), a kernel driver's "amdgpu 0000:65:00.0: ", CANN's source marks
# ("[FUNC:FuncErrorReason][FILE:error_message_manage.cc]"), and a sensor or event table of three or more
# bracketed "[Key: value]" fields per line (ESXi's "[Ok] [Type: Memory] [Name: ...] [Label: Green]"), and a date
# with a time of day in a line's first 30 characters, behind whatever prefix a logger writes (NeMo's "[NeMo I
# 2026-04-16 13:14:02 rnnt_models:292]", a timestamp cut by the paste: "6-04-16 13:14:00 label_looping_base:109"),
# and a source location anywhere in the line (round 3zj: Habana's "hcl_device_control_factory.cpp::71(initDevice):
# The condition [ false ] failed.", printed once per device: a program's message names its source, a model's
# answer does not)
_LOGSHAPE = re.compile(r"^\s{0,4}(?:\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]|\[[IWEF]\d{4} \d\d:|"
                       r"E[A-Z]\d{4}: |[a-z][\w-]{1,20} [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: )|"
                       r"\[FUNC:\w{1,60}\]\[FILE:|(?:\[[A-Z][A-Za-z ]{0,20}: [^\]\n]{1,120}\][ \t]{0,4}){3}|"
                       r"^[^\n]{0,30}?\b\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d\b|"
                       r"\b[\w-]{1,60}\.(?:cpp|cc|cxx|c|h|hpp|cu|cuh|py|go|rs|java)::?\d{1,6}\b")
# Producers whose output is never a model's answer: repetition in their rows (one state per NVLink link, the
# same driver message every second) is the format, not a degenerate completion. Also syslogd's broadcast to the
# terminals ("Message from syslogd@host at ...", wall) and the kernel's hardware-error prefix ("[Hardware Error]: ").
_MARKERS = ("NVRM", "NVIDIA-SMI", "Traceback", "NCCL", "DCGM", "Thread 0x", "nvidia-smi", "GPU 0", "#Entity",
            "dcgmi", "gpuId ", "NvLink", "nvidia-modeset", "nvidia-drm", "kubectl", "Exit Code",
            "Message from syslogd@", "[Hardware Error]: ")


# A raised exception named by its module path at the start of a line ("torch.distributed.elastic.multiprocessing.
# errors.ChildFailedError:", "vllm.v1.engine.exceptions.EngineDeadError: ..."): what prints it is a process, and the
# rules and record rows of the report around it (torchrun's "=====" banner) are its format, not a model's answer.
_RAISED = re.compile(r"^\s{0,4}(?:[a-z_]\w{0,40}\.){1,12}[A-Z]\w{0,60}(?:Error|Exception|Failure)\b:?", re.M)


def _plain_sample(text: str) -> Sample | None:
    if len(text) > 64 * 1024 or any(m in text for m in _MARKERS) or _RAISED.search(text):
        return None
    lines = [ln for ln in split_lines(text) if ln.strip()]
    if not lines:
        return None
    logged = [ln.strip() for ln in lines if _LOGLIKE.match(ln) or _LEVEL.search(ln) or _LOGSHAPE.search(ln)
              or paste.ALIGNED_ROW.match(ln)]
    if len(logged) / len(lines) >= 0.3:
        return None
    # a log line that comes back verbatim (an error printed at every retry, pasted twice in an issue) is a log's
    # repetition, whatever its share of the text: never a degenerate completion
    if len(set(logged)) < len(logged):
        return None
    return Sample(text, None, "unknown", (), 0)


def samples_of(text: str, plain: bool = True) -> tuple[list[Sample], str]:
    """The outputs a file holds and the format they came in ("json", "log", "text"; empty if none)."""
    got = _json_samples(text)
    if got:
        return got, "json"
    got = _log_samples(text)
    if got:
        return got, "log"
    got = _fragment_samples(text)
    if got:
        return got, "json"
    one = _plain_sample(text) if plain else None
    return ([one], "text") if one else ([], "")


def parse(text: str, name: str) -> Finding | None:
    """Outputs in a structured form (JSON, request logs, printed RequestOutputs)."""
    return _finding(text, name, plain=False)


def parse_plain(text: str, name: str) -> Finding | None:
    """A text nothing else recognised, read as one model output: a finding only when it is garbage."""
    return _finding(text, name, plain=True)


def _finding(text: str, name: str, plain: bool) -> Finding | None:
    found, fmt = samples_of(text, plain)
    if not found:
        return None
    per = measure(found)
    total = sum(q.samples for q in per.values())
    bad = sum(q.garbage for q in per.values())
    worst = max(per.values(), key=lambda q: (q.rate, q.garbage))
    facts: dict[str, Any] = compact({
        "format": fmt,
        "samples": total,
        "garbage": bad,
        "garbage_rate": round(bad / total, 4) if total else 0.0,
        "revisions": {r: q.to_json() for r, q in sorted(per.items())[:20]},
        "worst_revision": worst.revision if len(per) > 1 else None,
    })
    if fmt == "text":
        if not bad:
            return None  # a healthy-looking text is no evidence of anything
        g = garbage(found[0].output)
        facts["reasons"] = list(g.reasons)
        strong = {"one_character", "special_tokens", "constant_token_ids", "replacement_characters"}
        conf = 0.65 if strong & set(g.reasons) or len(g.reasons) > 1 else 0.5
        facts["reading"] = "the text is degenerate model output: " + ", ".join(g.reasons)
        return Finding(name, "garbage_output", False, "bad-model-rollout", conf, facts, (1,), "outputs",
                       severity="error", category="bad-output")
    others = [q for q in per.values() if q is not worst]
    other_rate = max((q.rate for q in others), default=0.0)
    if worst.garbage and (worst.rate >= GARBAGE_RATE_ALERT or worst.garbage >= 3) and worst.rate > other_rate:
        conf = min(0.85, 0.5 + 0.35 * worst.rate + (0.05 if len(per) > 1 and other_rate < worst.rate / 2 else 0))
        facts["reasons"] = dict(worst.reasons.most_common())
        facts["reading"] = (f"{worst.garbage} of {worst.samples} outputs of {worst.revision} are garbage "
                            f"({', '.join(worst.reasons)})" + (f"; other revisions at most {other_rate:.0%}"
                                                               if others else ""))
        return Finding(name, "garbage_outputs", False, "bad-model-rollout", conf, facts, line_numbers(worst.lines),
                       "outputs", severity="error", category="bad-output")
    facts["reading"] = "sampled outputs look like normal text"
    return Finding(name, "model_outputs_ok", True, None, 0.55, facts, (), "outputs", severity="info",
                   category="benign")


_REPR_LINE = re.compile(r"""^\s{0,8}(?:'[^'\n]{8,4000}'|"[^"\n]{8,4000}")\s*$""")


def parse_quoted(text: str, name: str) -> Finding | None:
    """Model outputs quoted in the prose of a pasted document (the paste reader finds them: a quoted span,
    the text after an "output:" cue, a blockquote or fence that is not a log): a finding when one is
    garbage. Log and command text is never read as an output."""
    bad: list[tuple[int, str, tuple[str, ...]]] = []
    quoted = paste.read(text).quoted
    vocab = words_of(text) if quoted else frozenset()
    for q in quoted[:200]:
        g = garbage(q.text, vocab=vocab)
        if g.garbage:
            bad.append((q.line, q.text, g.reasons))
            continue
        # a Python string literal printed with repr() ('L 1. 000\n\n...'): measured as the string it holds
        for k, ln in enumerate(q.text.splitlines()[:200]):
            lit = _literal(ln.strip()) if _REPR_LINE.match(ln) else None
            if lit is not None and garbage(lit).garbage:
                bad.append((q.line + k, lit, garbage(lit).reasons))
                break
        else:
            if q.named:  # the user calls it gibberish / garbage / garbled right above it
                bad.append((q.line, q.text, ("called_garbage",)))
    if not bad:
        return None
    sample = bad[0][1]
    facts: dict[str, Any] = compact({
        "format": "quoted",
        "samples": len(quoted),
        "garbage": len(bad),
        "reasons": sorted({r for _, _, rs in bad for r in rs}),
        "sample": sample[:200],
        "reading": "a model output quoted in the text is garbage",
        "next_step": "compare outputs per revision: a new revision only is a bad rollout, one pod only a GPU",
    })
    lines = tuple(sorted({ln for ln, _, _ in bad}))[:20]
    return Finding(name, "garbage_quoted_output", False, "bad-model-rollout", 0.45, facts, lines, "outputs",
                   severity="warning", category="bad-output")

