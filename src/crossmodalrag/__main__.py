from crossmodalrag.cli.main import main

raise SystemExit(main())
