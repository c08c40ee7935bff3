"""tapeformer's tokenizers in Python, read from their stored form (docs/checkpoint.md, "The
tokenizer's stored form"): the same ids as data/char_tokenizer.cpp and data/bpe_tokenizer.cpp for
every text. Standard library only.

    tok = tokenizer_from_string(stored_text)   # bytes(h5py.File(ckpt)["tokenizer"][()]).decode()
    ids = tok.encode("The jury said.")         # list of int
    tok.decode(ids) == "The jury said."        # BPE always; char when every character is known

Texts are UTF-8 bytes, as in tapeformer: encode() takes bytes or a str (encoded with
'surrogateescape', so a str read with that error handler gives back its exact bytes), and decode()
returns a str decoded the same way (decode_bytes() the bytes themselves).
"""


class TokenizerError(ValueError):
    """A stored form this module cannot read."""


def _lines(serialised, kind):
    lines = serialised.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    header = f"tapeformer-tokenizer {kind} 1"
    if not lines or lines[0] != header:
        raise TokenizerError(f"tokenizer: expected header '{header}', got '{lines[0][:80] if lines else ''}'")
    return lines[1:]


def _count(line, key):
    if not line.startswith(key + " "):
        raise TokenizerError(f"tokenizer: expected a '{key} <n>' line, got '{line[:80]}'")
    return int(line[len(key) + 1:])


def _specials(lines, at):
    k = _count(lines[at] if at < len(lines) else "", "specials")
    names = lines[at + 1: at + 1 + k]
    if len(names) != k or at + 1 + k != len(lines):
        raise TokenizerError(f"tokenizer: {k} specials listed, {len(lines) - at - 1} lines follow")
    return names


class Tokenizer:
    """Shared by both kinds: special tokens take the ids after the learned vocabulary."""
    kind = ""

    def __init__(self, base_vocab_size, specials):
        self.base_vocab_size = base_vocab_size
        self.specials = list(specials)  # names, in id order

    @property
    def vocab_size(self):
        return self.base_vocab_size + len(self.specials)

    def id_of(self, special):
        if special not in self.specials:
            raise TokenizerError(f"tokenizer ({self.kind}): no special token '{special}' (specials: "
                           f"{' '.join(self.specials) or 'none'})")
        return self.base_vocab_size + self.specials.index(special)

    def special_ids(self):
        """Every id that is not text, ascending (the char tokenizer's <unk> too)."""
        return list(range(self.base_vocab_size, self.vocab_size))

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", "surrogateescape")

    def decode_bytes(self, ids):
        out = []
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"{type(self).__name__}.decode: id {i} outside [0, {self.vocab_size})")
            special = i - self.base_vocab_size
            out.append(self._token_bytes(i) if special < 0 else self.specials[special].encode())
        return b"".join(out)

    @staticmethod
    def _bytes(text):
        return text if isinstance(text, (bytes, bytearray)) else text.encode("utf-8", "surrogateescape")


class CharTokenizer(Tokenizer):
    """Id 0 is <unk>; 1 .. n the stored code points, ascending; then the specials. A code point
    outside the list, and each byte that is not valid UTF-8 (RFC 3629), encodes to 0."""
    kind = "char"
    UNKNOWN = 0

    def __init__(self, code_points, specials):
        super().__init__(1 + len(code_points), specials)
        self.code_points = list(code_points)
        self._id = {cp: i + 1 for i, cp in enumerate(self.code_points)}

    @classmethod
    def from_string(cls, serialised):
        lines = _lines(serialised, "char")
        n = _count(lines[0] if lines else "", "code_points")
        code_points = []
        for line in lines[1:1 + n]:
            digits = line[2:]
            if not line.startswith("U+") or not 0 < len(digits) <= 6 or digits.strip("0123456789ABCDEF"):
                raise TokenizerError(f"CharTokenizer: bad code point line '{line}'")
            code_points.append(int(digits, 16))
        if len(code_points) != n or code_points != sorted(set(code_points)):
            raise TokenizerError("CharTokenizer: code points missing or not ascending")
        return cls(code_points, _specials(lines, 1 + n))

    def encode(self, text):
        # Python's strict UTF-8 decoder follows RFC 3629 as data/text.cpp does, and
        # 'surrogateescape' turns each byte of an invalid sequence into one U+DC80..U+DCFF, where
        # tapeformer reads one <unk> per such byte and resynchronises on the next.
        decoded = self._bytes(text).decode("utf-8", "surrogateescape")
        return [self.UNKNOWN if 0xDC80 <= ord(c) <= 0xDCFF else self._id.get(ord(c), self.UNKNOWN) for c in decoded]

    def special_ids(self):
        return [self.UNKNOWN] + super().special_ids()

    def id_of(self, special):
        return self.UNKNOWN if special == "<unk>" else super().id_of(special)

    def _token_bytes(self, i):
        return b"<unk>" if i == self.UNKNOWN else chr(self.code_points[i - 1]).encode()


# Note [pre-tokenisation] in data/bpe_tokenizer.h, version gpt2-classes: byte classes of the chunking.
SPACE, LETTER, DIGIT, OTHER = range(4)
CONTRACTIONS = (b"'s", b"'t", b"'re", b"'ve", b"'m", b"'ll", b"'d")


def _byte_class(c):
    if c == 0x20 or 0x09 <= c <= 0x0D:
        return SPACE
    if 0x61 <= (c | 0x20) <= 0x7A or c >= 0x80:  # ASCII letters, and every UTF-8 byte
        return LETTER
    return DIGIT if 0x30 <= c <= 0x39 else OTHER


BYTE_CLASS = [_byte_class(c) for c in range(256)]


def pretokenize_gpt2_classes(text):
    """bytes -> chunks: an optional single leading space and a maximal run of one class; GPT-2's
    contractions; whitespace not leading a word forms chunks of its own."""
    cls = [BYTE_CLASS[c] for c in text]
    n, i, chunks = len(text), 0, []
    while i < n:
        body = i
        if text[i] == 0x20 and i + 1 < n and cls[i + 1] != SPACE:
            body = i + 1  # " the"
        elif cls[i] == SPACE:
            j = i
            while j < n and cls[j] == SPACE:
                j += 1
            if j < n and j - i >= 2 and text[j - 1] == 0x20:
                j -= 1  # the last space leads the next word
            chunks.append(text[i:j])
            i = j
            continue
        if body == i and text[i] == 0x27:  # '
            contraction = next((c for c in CONTRACTIONS if text.startswith(c, i)), None)
            if contraction:
                chunks.append(contraction)
                i += len(contraction)
                continue
        j = body + 1
        while j < n and cls[j] == cls[body]:
            j += 1
        chunks.append(text[i:j])
        i = j
    return chunks



# Version gpt2: GPT-2's expression over Unicode 15.1's classes, read from the table tapeformer is
# built with (data/unicode_classes_table.inc, generated by scripts/gen_unicode_classes.py).
WHITE_SPACE = SPACE
NUMBER = DIGIT


def _read_unicode_classes():
    import bisect
    import pathlib
    import re
    table = (pathlib.Path(__file__).resolve().parent.parent / "data" / "unicode_classes_table.inc").read_text()
    ranges = {}
    for name in ("kLetters", "kNumbers", "kWhiteSpace"):
        body = table.split(f"{name}[] = {{")[1].split("};")[0]
        ranges[name] = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+)\}", body)]

    def inside(name, cp):
        r = ranges[name]
        i = bisect.bisect_right(r, (cp, 0x7FFFFFFF)) - 1
        return i >= 0 and r[i][0] <= cp <= r[i][1]

    def code_point_class(cp):
        if inside("kLetters", cp):
            return LETTER
        if inside("kNumbers", cp):
            return NUMBER
        return WHITE_SPACE if inside("kWhiteSpace", cp) else OTHER
    return code_point_class


_code_point_class = None


def _decode_code_points(text):
    """bytes -> [(start, length, code point)]; a byte that does not start a well-formed sequence (a
    lead byte and the continuation bytes it announces) is U+FFFD of length 1, as in llama.cpp."""
    out, at, n = [], 0, len(text)
    while at < n:
        lead = text[at]
        length = 1 if lead < 0x80 else 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else \
            4 if 0xF0 <= lead < 0xF8 else 0
        if length == 0 or at + length > n or any(text[at + k] & 0xC0 != 0x80 for k in range(1, length)):
            out.append((at, 1, 0xFFFD))
            at += 1
            continue
        cp = lead & (0x7F >> length) if length > 1 else lead
        for k in range(1, length):
            cp = cp << 6 | (text[at + k] & 0x3F)
        out.append((at, length, cp))
        at += length
    return out


def pretokenize_gpt2(text):
    """bytes -> chunks: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    global _code_point_class
    if _code_point_class is None:
        _code_point_class = _read_unicode_classes()
    cps = _decode_code_points(text)
    m = len(cps)
    starts = [c[0] for c in cps] + [len(text)]
    cls = [_code_point_class(c[2]) for c in cps]

    def ascii_at(k):
        return chr(cps[k][2]) if k < m and cps[k][1] == 1 and cps[k][2] < 0x80 else ""
    chunks, k = [], 0
    while k < m:
        if ascii_at(k) == "'":
            a, b = ascii_at(k + 1), ascii_at(k + 2)
            length = 2 if a in ("s", "t", "m", "d") else 3 if (a + b) in ("re", "ve", "ll") else 0
            if length:
                chunks.append(text[starts[k]:starts[k + length]])
                k += length
                continue
        body = k + 1 if ascii_at(k) == " " and k + 1 < m and cls[k + 1] != WHITE_SPACE else k
        end = body + 1
        if cls[body] != WHITE_SPACE:
            while end < m and cls[end] == cls[body]:
                end += 1
        else:
            while end < m and cls[end] == WHITE_SPACE:
                end += 1
            if end - k > 1 and end < m:
                end -= 1  # the last whitespace stays with what follows
        chunks.append(text[starts[k]:starts[end]])
        k = end
    return chunks


PRETOKENIZERS = {"gpt2": pretokenize_gpt2, "gpt2-classes": pretokenize_gpt2_classes}


class BpeTokenizer(Tokenizer):
    """Byte-level BPE: ids 0 .. 255 the bytes, 256 + r merge r, then the specials. Within a chunk
    the lowest-ranked merge present is applied, left to right, until none applies."""
    kind = "bpe"

    def __init__(self, merges, specials, pretokenizer="gpt2"):
        super().__init__(256 + len(merges), specials)
        self.pretokenize = PRETOKENIZERS[pretokenizer]
        self.merges = list(merges)
        self.rank = {}
        self.token = [bytes([b]) for b in range(256)]  # id -> its bytes
        for r, (left, right) in enumerate(self.merges):
            if not (0 <= left < 256 + r and 0 <= right < 256 + r) or (left, right) in self.rank:
                raise TokenizerError(f"BpeTokenizer: merge {r} ({left}, {right}) repeats or uses an undefined id")
            self.rank[(left, right)] = r
            self.token.append(self.token[left] + self.token[right])

    @classmethod
    def from_string(cls, serialised):
        lines = _lines(serialised, "bpe")
        name = lines[0][len("pretokenizer "):] if lines and lines[0].startswith("pretokenizer ") else ""
        if name not in PRETOKENIZERS:
            raise TokenizerError(f"BpeTokenizer: pretokenizer '{lines[0] if lines else ''}' is not supported "
                                 f"(known: {', '.join(PRETOKENIZERS)})")
        m = _count(lines[1] if len(lines) > 1 else "", "merges")
        merges = [tuple(int(x) for x in line.split(" ")) for line in lines[2:2 + m]]
        return cls(merges, _specials(lines, 2 + m), name)

    def encode(self, text):
        ids, seen = [], {}  # chunk -> its ids: natural text repeats its words
        for chunk in self.pretokenize(self._bytes(text)):
            if chunk not in seen:
                seen[chunk] = self._encode_chunk(chunk)
            ids.extend(seen[chunk])
        return ids

    def _encode_chunk(self, chunk):
        # A merge creates only pairs holding its new id, whose ranks are higher, so applying the
        # lowest rank everywhere (left to right, "a a a" -> "aa a") then the next is the order of
        # tapeformer's heap over (rank, position).
        symbols = list(chunk)
        while len(symbols) > 1:
            ranks = [self.rank.get(pair) for pair in zip(symbols, symbols[1:])]
            best = min((r for r in ranks if r is not None), default=None)
            if best is None:
                break
            pair, merged, i = self.merges[best], [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                    merged.append(256 + best)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return symbols

    def _token_bytes(self, i):
        return self.token[i]


def tokenizer_from_string(serialised):
    """Either kind, from its stored form (the checkpoint's /tokenizer)."""
    header = serialised.split("\n", 1)[0]
    kinds = {"tapeformer-tokenizer char 1": CharTokenizer, "tapeformer-tokenizer bpe 1": BpeTokenizer}
    if header not in kinds:
        raise TokenizerError(f"tokenizer: unknown stored form, header '{header[:80]}' (known: {', '.join(kinds)})")
    return kinds[header].from_string(serialised)
