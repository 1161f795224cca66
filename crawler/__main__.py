from crawler.cli.main import main

raise SystemExit(main())
