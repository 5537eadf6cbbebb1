"""Knowledge bases: where documents are kept (``documents``), turning one into text
(``extract``) and chunks (``chunk``), embedding them (``embed``), the worker's ingestion
job (``ingest``), and searching on behalf of a run or a user (``search``). The SQL is in
sql/schema/16_knowledge.sql, called through yuxi/queue/knowledge.py."""
