"""Files: where they live (``layout``), confinement of client and model paths
(``workdir``), the user's workspace prompts and memory (``workspace``, ``memory``), and
conversation attachments (``attachments``)."""
