"""Teaching: links that set up an experiment, lessons that walk through one, and a teacher's view.

Here live the checks of every value a link or a lesson step gives a widget
(:mod:`~krr_app.teaching.links`; the rules and decisions alone, without Streamlit:
:mod:`~krr_app.teaching.link_rules`), lessons as data (:mod:`~krr_app.teaching.lessons`), a teacher's
link and the presenter view (:mod:`~krr_app.teaching.teacher`), and a run as Python: the
"reproduce in Python" snippet and the notebook export (:mod:`~krr_app.teaching.snippet`).

May import: ``krrcore``, ``krr_app`` (the root: settings, text, explain), ``krr_app.jobs`` (a run's
configuration), ``streamlit``.
"""
