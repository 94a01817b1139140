"""The configuration layer: reading config files, the schema and its validation, the errors users see.

It imports nothing else of the project, so every other layer may import it."""
