"""C++ source as the preprocessor reads it, for the scans that must see what the compiler sees (a
#define that renames a library, the function a file defines): line ends of every kind made "\\n" (CR LF
and a lone CR end a line too), a leading byte-order mark dropped, lines joined where a backslash ends
one (blanks after it too: GCC joins them with a warning), and each comment made one space, with string
and character literals (raw strings too) read as literals, so that a "/*" inside one opens nothing (and
a number's digit separator, 1'000, opens no character literal).

One pass, linear in the length of the text: a regex retrying `/\\*.*?\\*/` at every "/*" of an unclosed
comment took hours on a file of a few MiB, in the TA's process."""
from __future__ import annotations

import re

_SPLICE = re.compile(r"\\[ \t\f\v]*\n")
_NEXT = re.compile(r"""/[/*]|["']|(?<![\w.])\.?[0-9](?:'?[0-9A-Za-z_.]|[eEpP][+-])*""")
"""A comment, a literal, or a number: a number's digit separators (1'000) open no character literal."""
_RAW_PREFIXES = ("R", "LR", "uR", "UR", "u8R")
_RAW_OPEN = re.compile(r'([^()\\\s]{0,16})\(')  # a delimiter may hold a '"': R""(...)"" is one
_LITERAL = {q: re.compile(q + r"(?:[^" + q + r"\\\n]|\\.)*" + q + "?", re.S) for q in "\"'"}  # to its line's end if unclosed


def as_preprocessed(text: str) -> str:
    """`text` with its line ends, byte-order mark, line splices and comments as the preprocessor reads
    them (module docstring); literals are kept as they are."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    return strip_comments(_SPLICE.sub("", text))


def strip_comments(text: str) -> str:
    """Each comment of `text` made one space; string and character literals kept whole (a literal that
    is not closed ends with its line, as the compiler reads it)."""
    out, i, n = [], 0, len(text)
    while i < n:
        m = _NEXT.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        i = m.start()
        token = m.group()
        if token == "//":
            end = text.find("\n", i)
            out.append(" ")
            i = n if end < 0 else end
        elif token == "/*":
            end = text.find("*/", i + 2)
            out.append(" ")
            i = n if end < 0 else end + 2
        elif token[0] not in "\"'":  # a number, separators and all
            out.append(token)
            i = m.end()
        else:
            end = _literal_end(text, i)
            out.append(text[i:end])
            i = end
    return "".join(out)


def _literal_end(text: str, i: int) -> int:
    """Where the string or character literal opening at text[i] ends (just past it)."""
    quote = text[i]
    if quote == '"' and _raw(text, i):
        m = _RAW_OPEN.match(text, i + 1)
        if m:
            end = text.find(")" + m.group(1) + '"', m.end())
            return len(text) if end < 0 else end + len(m.group(1)) + 2
    return _LITERAL[quote].match(text, i).end()


def _raw(text: str, i: int) -> bool:
    """Whether the '"' at text[i] opens a raw string (R"x(...)x", LR, uR, UR, u8R): its prefix, and no
    letter, digit or underscore before the prefix (looked at over a few characters only)."""
    for p in _RAW_PREFIXES:
        start = i - len(p)
        if start >= 0 and text[start:i] == p and (start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")):
            return True
    return False
