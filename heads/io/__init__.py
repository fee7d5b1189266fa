"""Files in and out: images and label maps read with errors that name the file (:mod:`.images`), and atomic, durable
replacement of checkpoints and feature shards (:mod:`.durable`). numpy and OpenCV only: tools import it before
torch."""
