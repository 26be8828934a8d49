"""The Textual dashboard: the only package in gpuwatch that imports textual."""
