"""Splitting a document's text into chunks (langchain-text-splitters), with separators
that also fit Chinese text (。！？；，), and a token estimate per chunk. The splitter
(LangChain's) is imported with the first split, not with the module."""

from __future__ import annotations

import re
from dataclasses import dataclass

CHUNK_CHARS = 800
OVERLAP_CHARS = 100
_SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", " ", ""]
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


@dataclass(frozen=True)
class Chunk:
    text: str
    tokens: int


def estimate_tokens(text: str) -> int:
    """About one token per CJK character and one per four characters of other words
    (what OpenAI-style tokenizers average); no tokenizer file is needed."""
    cjk = len(_CJK.findall(text))
    other = sum(max(1, round(len(word) / 4)) for word in _WORD.findall(text))
    return cjk + other


def split_text(
    text: str, *, chunk_chars: int = CHUNK_CHARS, overlap_chars: int = OVERLAP_CHARS
) -> list[Chunk]:
    """The chunks of ``text``, in order; whitespace-only pieces are dropped."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=chunk_chars,
        chunk_overlap=overlap_chars,
        separators=_SEPARATORS,
        keep_separator="end",
        strip_whitespace=True,
    )
    return [
        Chunk(piece, estimate_tokens(piece))
        for piece in splitter.split_text(text.replace("\x00", ""))
        if piece.strip()
    ]
