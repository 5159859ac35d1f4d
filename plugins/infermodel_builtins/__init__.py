"""The plugins that ship with infermodel: the base physics and the built-in levers.

Each module here is an ordinary plugin, registered through the ``infermodel``
entry-point group exactly as a third-party plugin is; the core imports none of them.
"""

M10 = "Module 10: Inference and serving"
LAB = "Inference lab"
