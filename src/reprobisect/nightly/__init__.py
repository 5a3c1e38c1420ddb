"""What changed since last night, on two tracks, each a night (``release_night``, ``main_night``), what it does
about each regression (``release_follow_up``, ``main_follow_up``) and its text (``release_text``, ``main_text``);
what a release night runs (``targets``), how its runs meet the baseline's (``regressions``), its slower runs
(``slowdowns``), whose side a regression is on (``other_side``) and the state carried between nights (``state``)."""
