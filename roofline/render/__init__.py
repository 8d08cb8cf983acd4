"""Renderers turn computed values into text. They never compute roofline quantities themselves."""

from roofline.render.base import Renderer, to_text

__all__ = ["Renderer", "to_text"]
