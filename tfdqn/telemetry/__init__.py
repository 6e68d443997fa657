"""Telemetry: phase timer, system monitor (CPU, RSS, NVML; no TensorFlow), TensorBoard writer, FLOP counts."""
