"""From a document to its text: plain text and Markdown, HTML, PDF (pypdf) and Word
.docx (python-docx). Anything else is refused with a message naming what is supported.
Text and HTML are read from their bytes; PDF and Word from a file (``FILE_KINDS``: their
readers seek). Runs in a worker thread: extraction is CPU work."""

from __future__ import annotations

import html.parser
import zipfile
from pathlib import Path

SUPPORTED = "txt, md, html, pdf, docx"
_TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".text", ".csv", ".rst", ".log"})
_HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
_DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
FILE_KINDS = frozenset({"pdf", "docx"})
"""The kinds read from a file (``extract_text``); the others from bytes (``extract_data``)."""


class ExtractionError(ValueError):
    """The document cannot be read as text; the message says why (shown to the user)."""


def document_kind(filename: str, media_type: str) -> str:
    """``text``, ``html``, ``pdf`` or ``docx``; ExtractionError for anything else."""
    suffix = Path(filename).suffix.lower()
    if suffix == ".pdf" or media_type == "application/pdf":
        return "pdf"
    if suffix == ".docx" or media_type == _DOCX_TYPE:
        return "docx"
    if suffix in _HTML_SUFFIXES or media_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if suffix in _TEXT_SUFFIXES or media_type.startswith("text/"):
        return "text"
    raise ExtractionError(
        f"{filename}: unsupported document type {media_type} (supported: {SUPPORTED})"
    )


def extract_text(path: Path, filename: str, media_type: str) -> str:
    """The text of the document in the file at ``path`` (named ``filename`` to users),
    paragraphs separated by blank lines."""
    kind = document_kind(filename, media_type)
    try:
        if kind == "pdf":
            return _pdf(path, filename)
        if kind == "docx":
            return _docx(path)
        return _text_of(path.read_bytes(), kind)
    except (ExtractionError, FileNotFoundError):
        raise
    except OSError as error:  # its message would name the file's path on this host
        raise ExtractionError(
            f"{filename}: cannot read it: {error.strerror or type(error).__name__}"
        ) from None
    except Exception as error:
        raise _unreadable(filename, kind, error, path) from None


def extract_data(data: bytes, filename: str, media_type: str) -> str:
    """The text of a text or HTML document from its bytes (the kinds not in
    ``FILE_KINDS``)."""
    kind = document_kind(filename, media_type)
    if kind in FILE_KINDS:
        raise ValueError(f"a {kind} document is read from a file (extract_text)")
    try:
        return _text_of(data, kind)
    except ExtractionError:
        raise
    except Exception as error:
        raise _unreadable(filename, kind, error) from None


def _text_of(data: bytes, kind: str) -> str:
    text = _decode(data)
    return _html(text) if kind == "html" else text


def _unreadable(
    filename: str, kind: str, error: Exception, path: Path | None = None
) -> ExtractionError:
    if isinstance(error, (zipfile.BadZipFile, KeyError, ValueError)):
        detail = str(error)
    else:  # pypdf raises many types of its own on broken files
        detail = f"{type(error).__name__}: {error}"
    if path is not None:  # a reader's message may name the file: users see its name only
        detail = detail.replace(str(path), filename)
    return ExtractionError(f"{filename}: cannot read it as {kind}: {detail}")


def _decode(data: bytes) -> str:
    for encoding in (
        ("utf-8-sig", "utf-16")
        if data[:2] in (b"\xff\xfe", b"\xfe\xff")
        else (
            "utf-8-sig",
            "gb18030",
        )
    ):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _pdf(path: Path, filename: str) -> str:
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted:
        raise ExtractionError(f"{filename}: the PDF is encrypted")
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()


def _docx(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    parts = [paragraph.text for paragraph in document.paragraphs if paragraph.text.strip()]
    for table in document.tables:
        for row in table.rows:
            cells = [cell.text.strip() for cell in row.cells if cell.text.strip()]
            if cells:
                parts.append(" | ".join(cells))
    return "\n\n".join(parts)


class _HtmlText(html.parser.HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "head"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "tr",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "section",
            "article",
            "pre",
            "blockquote",
            "table",
            "ul",
            "ol",
            "title",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _html(text: str) -> str:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    paragraphs = (" ".join(piece.split()) for piece in "".join(parser.parts).split("\n\n"))
    return "\n\n".join(p for p in paragraphs if p)
