"""The Whisper model family (encoder-decoder transformer over 30 s log-mel windows), written in the project:
front end (features.py), network (model.py), tokenizer (tokenizer.py), checkpoint loaders (checkpoints.py),
batched decoding (decoding.py) and the host adapter (adapter.py)."""
