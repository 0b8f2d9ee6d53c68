"""The blind profile: multi-tenant traffic written without reading the detector (see README.md). Frozen."""
