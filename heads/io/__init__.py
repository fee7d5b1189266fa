"""Files in: images and label maps read with errors that name the file (:mod:`.images`); depth maps, validity masks
and camera intrinsics of RGB-D folders (:mod:`.depth`), and the one listing of such a folder that the dataset and
``tools/check_dataset.py`` share (:mod:`.rgbd_folder`); every folder search, following symbolic links to folders
(:mod:`.files`); class colours where a dataset names none (:mod:`.palettes`); point clouds of depth maps and PLY
files (:mod:`.pointcloud`); camera poses of 7-Scenes' ``frame-NNNNNN.pose.txt`` (:mod:`.poses`). numpy and OpenCV
only: tools import it before torch. (Atomic, durable writes of checkpoints and other files:
:mod:`zoo.weights.durable`.)"""
