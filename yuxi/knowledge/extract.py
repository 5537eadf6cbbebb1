"""From a document file to its text: plain text and Markdown, HTML, PDF (pypdf) and
Word .docx (python-docx). Anything else is refused with a message naming what is
supported. Runs in a worker thread: extraction is CPU work."""

from __future__ import annotations

import html.parser
import zipfile
from pathlib import Path

SUPPORTED = "txt, md, html, pdf, docx"
_TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".text", ".csv", ".rst", ".log"})
_HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
_DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


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
    """The document's text, paragraphs separated by blank lines."""
    kind = document_kind(filename, media_type)
    try:
        if kind == "pdf":
            return _pdf(path)
        if kind == "docx":
            return _docx(path)
        text = _decode(path.read_bytes())
        return _html(text) if kind == "html" else text
    except (ExtractionError, FileNotFoundError):
        raise
    except OSError as error:  # its message would name the file's path on this host
        raise ExtractionError(
            f"{filename}: cannot read it: {error.strerror or type(error).__name__}"
        ) from None
    except (zipfile.BadZipFile, KeyError, ValueError) as error:
        raise ExtractionError(f"{filename}: cannot read it as {kind}: {error}") from None
    except Exception as error:  # pypdf raises many types of its own on broken files
        raise ExtractionError(
            f"{filename}: cannot read it as {kind}: {type(error).__name__}: {error}"
        ) from None


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


def _pdf(path: Path) -> str:
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted:
        raise ExtractionError(f"{path.name}: the PDF is encrypted")
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
