"""The text the similarity report hands copydetect for a file: a skeleton of it that Pygments' CUDA lexer
(copydetect's tokenizer) reads as the same tokens, in time linear in its length, and the map back from
positions in the skeleton to positions in the file, for the side-by-side view (origin).

Why: that lexer took quadratic time on some texts a student can write: 80 KB of "#/*" took the
TA's similarity report 40 s, and a file may hold 4 MiB."""
from __future__ import annotations

import bisect
import re
from array import array

# Pygments' C lexer (copydetect's) is quadratic on some texts: a search that finds nothing runs to the end
# and is tried again further on (a comment's end after each "#/*", a function's ")" after each "{", a raw
# string's end, an include's ">"), and long runs of whitespace are slow (20 KB of newlines: 90 s).
_CODE = re.compile(r"""(?P<ws>\s+)|(?P<block>/(?:\\\n)?\*)|(?P<line>//(?:[^\n]|(?<=\\)\n)*)"""
                   r"""|(?P<raw>(?:[LuU]|u8)?R"(?P<delim>[^\\()\s]{0,16})\()|(?P<str>"(?:[^"\\\n]|\\[\s\S])*"?)"""
                   r"""|(?P<chr>'(?:\\.|\\[0-7]{1,3}|\\x[a-fA-F0-9]{1,2}|[^\\'\n])')|(?P<brace>\{)|(?P<hash>\#)""")
_DIRECTIVE = re.compile(r"(?P<ws>\s+)|(?P<block>/\*)|(?P<line>//[^\n]*)|(?P<lt><)")  # in a "#" line: no strings
_CLOSE, _UNSEEN = re.compile(r"\*(?:\\\n)?/"), re.compile(r"""[^;"'){/]+""")
_REPEAT, _WS = re.compile(r"(.)\1+"), re.compile(r"\s+")
LONG = 256
"""A longer comment is cut to what the lexer's searches through code stop at; a "{" further than this from
the last ; " ' or ) gets a comment holding a ";" before it: the search for a function's ")" stops there."""


def _space(run: str) -> str:
    """A run of whitespace made short: two of its newlines at most, one space on either side (one that is
    not a space or a tab kept: a label is a name after only those at the start of a line)."""
    def one(part):
        rest = part.strip(" \t")
        return rest[0] if rest else part[:1] and " "
    lines = run.split("\n")
    return one(run) if len(lines) == 1 else one(lines[0]) + "\n" * min(len(lines) - 1, 2) + one(lines[-1])


def _comment(text: str, opening: str, closing: str) -> str:
    """A short comment whole but for its whitespace: the lexer reads part of one in a function's parameters
    as code where it holds a ")". A long one cut to its newline, if any, and what the searches stop at (one
    in a function's parameters with a ")" in it may then give other tokens)."""
    if len(text) <= LONG:
        return _WS.sub(lambda m: _space(m.group()), text)
    body = text[len(opening):len(text) - len(closing)] if text.endswith(closing) else text[len(opening):]
    return opening + _REPEAT.sub(r"\1", _UNSEEN.sub("", body)) + "\n" * ("\n" in text and bool(closing)) + closing


def _raw_ends(text: str) -> dict:
    """delimiter -> where each `)delimiter"` that can end a raw string starts, in order."""
    ends = {}
    for q in (m.start() for m in re.finditer('"', text)):
        p = text.rfind(")", max(0, q - 17), q)
        if p >= 0 and not re.search(r"[\\(\s]", text[p + 1:q]):
            ends.setdefault(text[p + 1:q], []).append(p)
    return ends


def skeleton(text: str) -> tuple:
    """(the text copydetect is given for a file, where): Pygments' CUDA lexer makes the same tokens of it,
    in time linear in its length. where: (starts, origins) of its pieces, for origin()."""
    out, starts, origins = [], array("q"), array("q")
    size, last_stop, pos, bol, directive = 0, 0, 0, True, False
    last_gt, raw_ends, end_at = text.rfind(">"), None, -2

    def put(piece, at, exact=True):
        nonlocal size, last_stop
        if piece:
            out.append(piece), starts.append(size), origins.append(at if exact else ~at)
            k = max(piece.rfind(";"), piece.rfind(")"), piece.rfind('"'), piece.rfind("'"))
            last_stop = size + k if k >= 0 else last_stop
            size += len(piece)
    while pos < len(text):
        m = (_DIRECTIVE if directive else _CODE).search(text, pos)
        if not m:
            put(text[pos:], pos)
            break
        if m.start() > pos:
            put(text[pos:m.start()], pos)
            bol = False
        kind, i, pos = m.lastgroup, m.start(), m.end()
        if kind == "ws":
            run = m.group()
            if directive and "\n" in run and not (run.count("\n") == 1 and run[0] == "\n" and text[i - 1] == "\\"):
                directive = False
            bol = bol or ("\n" in run and not directive)
            put(_space(run).lstrip("\n") if not size else _space(run), i, False)
        elif kind == "block" and directive:
            if -1 != end_at < pos:
                end_at = text.find("*/", pos)
            if end_at < 0:  # no comment to the lexer here: a "/", and more of the line
                put("/", i), put(" ", i + 1, False)
                pos -= 1
            else:
                put(_comment(text[i:end_at + 2], "/*", "*/"), i, False)
                pos = end_at + 2
        elif kind == "block":
            close = _CLOSE.search(text, pos)
            end = close.end() if close else len(text)
            put(_comment(text[i:end], "/*", "*/"), i, False)
            bol, pos = bol and "\n" not in text[i:end], end
        elif kind == "line":
            put(_comment(m.group(), "//", "") + "\\\n" * (len(m.group()) > LONG and "\n" in m.group()), i, False)
            directive = False
        elif kind == "raw":
            raw_ends = _raw_ends(text) if raw_ends is None else raw_ends
            found, quote = raw_ends.get(m.group("delim"), []), m.start("delim") - 1
            k = bisect.bisect_left(found, pos)
            if k < len(found) and not (i and re.match(r"[\w$]", text[i - 1])):
                pos = found[k] + len(m.group("delim")) + 2
                put(text[i:pos], i)
            else:  # no raw string to the lexer; a space keeps it from searching for an end there is not
                put(text[i:quote], i), put(" " * (k == len(found)), quote, False)
                pos, bol = quote, False
        elif kind == "brace" and size - last_stop > LONG:
            put(" /*;*/", i, False), put("{", i)
            bol = False
        elif kind == "lt" and i > last_gt:
            put("(", i)  # an include's "<" with no ">" after it
        else:
            put(m.group(), i)
            directive, bol = directive or (kind == "hash" and bol), False
    return "".join(out), (starts, origins)


def origin(where: tuple, positions):
    """Where in the file positions in its skeleton come from (a numpy array of them, of the same shape)."""
    import numpy as np
    if not np.size(positions) or not len(where[0]):
        return positions
    starts, origins = np.frombuffer(where[0], dtype=np.int64), np.frombuffer(where[1], dtype=np.int64)
    k = np.maximum(np.searchsorted(starts, positions, side="right") - 1, 0)
    return np.where(origins[k] >= 0, origins[k] + (positions - starts[k]), ~origins[k])
