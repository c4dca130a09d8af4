/* Stands in for an Open MPI header that Debian's libopenmpi-dev does not ship although
 * ompi/op/op.h includes it. Only the int <-> Fortran INTEGER conversions are used there, and
 * they are identities when a Fortran INTEGER is a C int, which the check below insists on. */
#ifndef IBCOLL_COMPAT_FINT_2_INT_H
#define IBCOLL_COMPAT_FINT_2_INT_H

#if OMPI_SIZEOF_FORTRAN_INTEGER != SIZEOF_INT
#error "this stub assumes a Fortran INTEGER is a C int"
#endif

#define OMPI_INT_2_FINT(a) (a)
#define OMPI_FINT_2_INT(a) (a)
#define OMPI_PFINT_2_PINT(a) (a)

#endif
