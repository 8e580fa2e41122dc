"""ProGraf from pixels: pictures of any output with its failed points marked, and the image-only
verifier (OCR, OpenCV, the vision judge) with its calibration on our own renders."""
