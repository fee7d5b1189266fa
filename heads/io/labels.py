"""Label maps: the value of the pixels that count for no class (void, unlabelled, padding), as mmseg uses it."""
IGNORE_INDEX = 255
