.PHONY: build typecheck lint test bench start
build: ; npm run build
typecheck: ; npm run typecheck
lint: ; npm run lint
test: ; npm test
bench: ; npm run bench
start: ; npm start
