"""Mind2Web's official data format and its loader (`loader.py`); the project's own small corpus in
that format lives in this folder's split subfolders (written by `environments.mind2web.build`)."""
