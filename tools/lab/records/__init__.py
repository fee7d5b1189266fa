"""The results store: every measuring tool appends its records here (:mod:`.store`), one JSON-lines file per machine
kind (:mod:`.machine`) under the repository's ``records/``; the docs' figures are rendered from it, never typed."""
