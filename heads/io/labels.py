"""Label maps: the value of the pixels that count for no class (void, unlabelled, padding), as mmseg uses it, and
how a panoptic map packs a class and an instance into one integer."""
IGNORE_INDEX = 255

#: A panoptic map's pixel is ``label + instance * INSTANCE_OFFSET`` ('1 h w' int64; instance counts from 0 per image
#: for each thing, stuff has instance 0); pixels of no segment are ``num_classes`` (mmdet's convention).
INSTANCE_OFFSET = 1000
