"""Skills in the Agent Skills format: reading and checking them (``format``), and
resolving the ones a run has (``resolve``)."""
