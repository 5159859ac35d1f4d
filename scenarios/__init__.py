"""The scenarios that ship with infermodel, installed as package data.

Each ``*.toml`` file here is a scenario; a scenario anywhere names one as
``"infermodel:NAME"`` (``extends = "infermodel:case-study-24gb"``), and
``infermodel presets scenarios`` lists them. This folder is the repository's
``scenarios/``, mapped to the ``infermodel_scenarios`` package by ``setup.py``.
"""
