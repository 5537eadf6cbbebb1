"""Documents for the knowledge-base tests, made by the tests (no binaries committed): a
PDF written by hand (one Type0 font, Identity-H, whose ToUnicode CMap maps each 2-byte
code to the same Unicode code point, so Chinese and English both extract), and a .docx
built with python-docx."""

from __future__ import annotations

import io


def pdf_bytes(paragraphs: list[str]) -> bytes:
    """A one-page PDF whose text is ``paragraphs``, one text line each (BMP only)."""
    lines = []
    y = 780
    for paragraph in paragraphs:
        hexed = "".join(f"{ord(c):04X}" for c in paragraph)
        lines.append(f"BT /F1 12 Tf 40 {y} Td <{hexed}> Tj ET")
        y -= 20
    content = "\n".join(lines).encode()
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
        b"/CMapName /Adobe-Identity-UCS def /CMapType 2 def\n"
        b"1 begincodespacerange <0000> <FFFF> endcodespacerange\n"
        b"1 beginbfrange <0000> <FFFF> <0000> endbfrange\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end\n"
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842]"
        b" /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type0 /BaseFont /Generic /Encoding /Identity-H"
        b" /DescendantFonts [6 0 R] /ToUnicode 7 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Generic"
        b" /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >>"
        b" /FontDescriptor 8 0 R /DW 1000 >>",
        b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"endstream",
        b"<< /Type /FontDescriptor /FontName /Generic /Flags 4 /FontBBox [0 0 1000 1000]"
        b" /ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def docx_bytes(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
