"""Hugging Face transformers folders as this project's task models: one loader by ``model_type``
(:mod:`.folder`), one module per kind (:mod:`.dpt`, :mod:`.depth_anything`, :mod:`.upernet`, :mod:`.mask2former`,
:mod:`.eomt`), their config.json read field by field with the types the converters know (:mod:`.config`)."""
