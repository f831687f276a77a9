"""Motion-capture parsers and records (imported lazily by the data layer).

- ``asf``: Acclaim ASF skeleton / AMC motion parser and forward kinematics (``Skeleton``).
- ``cmu35``: CMU subject 35 walks/jogs, the paper's 'cmu35gplvm' features, their inverse
  and ``CMU35PoseRenderer``; ``build(paths, split)``.
- ``osu``: OSU ACCAD marker text captures (``osu_run1``, ...); ``build(name, paths)``.
- ``errors``: ``MocapParseError`` (a ``bgplvm.datasets.ParseError``/``ValueError`` naming the file).
"""
