"""House rules: no import circle, the fast lane, every docs snippet runs, README figures from committed runs."""
