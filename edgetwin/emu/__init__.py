"""The emulator and the real code paths it runs (torch.distributed GLOO ViT, CROWDio)."""
