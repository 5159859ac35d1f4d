extensions = ["infermodel.sphinxext"]
exclude_patterns = ["_build"]
infermodel_scenario_pages = "scenarios/*.toml"
infermodel_scenario_pages_dir = "generated"
