! names_one_line.f90: ALLOCATE(a(n/2), b(n)) makes one malloc call per
! array; only b is read in the loop (a is touched once), so b may be the
! only object of the line with samples: it is named b, not a|b.
!
! Build: gfortran -O2 -g -o names_one_line_f names_one_line.f90
program names_one_line
  implicit none
  integer :: n, i, r
  real(8), allocatable :: a(:), b(:)
  real(8) :: s
  n = 4000000
  allocate(a(n/2), b(n))
  a(1) = 1.0d0
  b = 2.0d0
  s = 0
  do r = 1, 40
    do i = 1, n, 8
      s = s + b(i)
    end do
  end do
  print *, 'names_one_line', s + a(1)
end program
