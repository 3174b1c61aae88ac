"""crossmodalrag: a local-first, cross-modal personal memory (`mem`)."""

import os

__version__ = "0.1.0"

# Nothing leaves the machine: onnxruntime (the embedder's and OCR's runtime) writes a telemetry
# event with a device id, OS, CPU and interpreter path to ~/.cache/Microsoft/DeveloperTools for
# upload on every process since 1.2x on Linux; this variable, read when its runtime starts, turns
# that off whole (no event, no device id, no uploader). Hugging Face's hub client likewise.
# setdefault: a user who sets them otherwise decides.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
