"""Rendering primitives shared by reports: plots, markdown number formats, the HTML page."""
