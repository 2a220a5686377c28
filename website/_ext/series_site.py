"""The series' own additions to Sphinx: Jupyter's heading anchors, and the front page's table of contents."""


def jupyter_slug(text: str) -> str:
    """A heading's anchor as Jupyter writes it ("How we measure" -> "How-we-measure"), so that one link,
    ``01_setup.ipynb#How-we-measure``, works in Jupyter, in Colab and on the site alike."""
    return text.strip().replace(" ", "-")


def add_toc(app, docname, source):
    """The front page is the README as GitHub shows it; on the site it also lists the pages, in a hidden toctree
    added here, so that the README itself carries no Sphinx directive."""
    if docname == app.config.root_doc:
        pages = "\n".join(app.config.series_pages)
        source[0] += f"\n\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{pages}\n```\n"


def setup(app):
    app.add_config_value("series_pages", [], "env")
    app.connect("source-read", add_toc)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
