"""Records to tables (the terminal's too), Markdown, HTML and plots; the only package besides nightly that imports
pandas. Renderers read no file: frame.py's loaders and logs.py read, write.py writes."""
