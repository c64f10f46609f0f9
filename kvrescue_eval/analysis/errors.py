class AnalysisInputError(ValueError):
    """Unusable input: names the file and the field at fault."""

    def __init__(self, path, field, problem):
        self.path, self.field, self.problem = str(path), field, problem
        where = f"{self.path}: field {field!r}" if field else self.path
        super().__init__(f"{where}: {problem}")
