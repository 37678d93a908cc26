"""The ``vits`` adapter: a VITS text-to-speech model with the shapes and parameter names of a Piper voice,
one weight file per voice, voices held resident on the device under a byte budget (adapter.py)."""
