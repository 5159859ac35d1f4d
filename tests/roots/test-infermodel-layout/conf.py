extensions = ["infermodel.sphinxext"]
exclude_patterns = ["_build"]
