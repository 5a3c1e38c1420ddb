"""Records to tables, Markdown, HTML and plots; the only package besides nightly that imports pandas. Renderers read
no file: load.py and logs.py read, write.py writes."""
