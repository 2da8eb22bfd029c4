"""``masorch view``: a local web page (and one-file export) of eval runs, traces and training runs.

:mod:`~masorch.view.source` says what a path is; :mod:`~masorch.view.app` turns it into the page's data
(through :mod:`evalrun`, :mod:`traces`, :mod:`sample`, :mod:`training`); :mod:`server` serves the page
and the data on loopback; :mod:`export` writes both into one HTML file.
"""
