extensions = ["infermodel.sphinxext"]
exclude_patterns = ["_build"]
infermodel_command_cwd = "."
