# rmqstore: `make run` opens the browser, `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
STORE  ?=
QUICK  ?=

export QT_QPA_PLATFORM ?= offscreen
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: run test bench package soak system-deps clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

# Spark needs a JRE; screenshots of CJK keys need a CJK font. Install them when
# we can (root + apt), otherwise say what is missing and carry on.
system-deps:
	@if ! command -v java >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a JRE for Spark (openjdk-17-jre-headless)"; \
	    apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 || \
	      (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1) || \
	      echo "WARNING: could not install a JRE: Spark scans and their tests will be skipped"; \
	  else echo "WARNING: no 'java' on PATH: install a JRE 17 to run Spark scans"; fi; \
	fi
	@if ! fc-list 2>/dev/null | grep -qiE 'cjk|wqy'; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q fonts-noto-cjk >/dev/null 2>&1 || \
	      echo "note: fonts-noto-cjk not installed: CJK keys render as boxes in screenshots"; \
	  fi; \
	fi

run: $(STAMP)
	$(PY) -m gui.app $(STORE)

test: $(STAMP) system-deps
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q tests

bench: $(STAMP)
	$(PY) -m bench $(if $(QUICK),--quick,)

soak: $(STAMP)
	$(PY) -m pytest -q tests/reliability --soak

package: $(STAMP)
	$(PY) -m pip install -q pyinstaller
	$(VENV)/bin/pyinstaller --noconfirm packaging/rmqstore.spec --distpath dist --workpath build/pyinstaller

clean:
	rm -rf build dist $(VENV) *.egg-info
