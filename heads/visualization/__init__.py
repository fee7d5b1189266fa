"""Pictures: label maps, depth maps, attention and boxes drawn as RGB arrays with legends and colour bars
(:mod:`.draw`, numpy and OpenCV only), and the hook that draws predictions during validation and testing
(:mod:`.hook`)."""
